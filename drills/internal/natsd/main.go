// Command natsd runs the NATS server Switchyard's tests embed
// (internal/natsembed: JetStream, loopback) as a process of its own, so a
// fault drill can SIGKILL it and start it again on the same port and store
// directory — what a NATS pod restart looks like to its clients. It prints
// "ready <url>" once it accepts connections.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchyard-dev/switchyard/internal/natsembed"
)

func main() {
	port := flag.Int("port", 0, "client port on 127.0.0.1 (0: a free one; never 4222, the machine's shared server)")
	store := flag.String("store", "", "JetStream store directory, kept across restarts (empty: a temporary one)")
	flag.Parse()
	if *port == 4222 {
		fmt.Fprintln(os.Stderr, "natsd: port 4222 belongs to the machine's shared NATS server")
		os.Exit(2)
	}
	s, err := natsembed.Start(natsembed.Options{Port: *port, StoreDir: *store})
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	fmt.Println("ready", s.URL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	<-ctx.Done()
	stop()
	s.Shutdown()
}
