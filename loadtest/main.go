// Command loadtest is Switchyard's load generator and routing benchmark, a
// client of public HTTP APIs like GuideLLM:
//
//	loadtest run      drive one workload against any OpenAI-compatible
//	                  endpoint (the gateway, a worker, a provider)
//	loadtest compare  start a simulated fleet and compare routing strategies
//	                  (random, round-robin, least-queue, switchyard, oracle)
//	loadtest report   re-render the table and HTML report from a JSON result
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = []command{
	{"run", "drive one workload against an OpenAI-compatible endpoint", runCmd},
	{"compare", "compare routing strategies on a simulated fleet (the routing benchmark)", compareCmd},
	{"report", "render the table and HTML report of a result file", reportCmd},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "loadtest: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "loadtest — load generator and routing benchmark for OpenAI-compatible endpoints")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: loadtest <command> [flags]   (loadtest <command> -h for its flags)")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}
