// Package natsembed runs an in-process NATS server with JetStream. `switchyard
// dev` uses it so a newcomer needs no NATS install, and tests use it when they
// want a server of their own. It always listens on loopback and, unless told
// otherwise, on a random port — never on 4222, which belongs to the machine's
// shared server.
package natsembed

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options for Start. The zero value is a random loopback port with JetStream
// in a fresh temporary directory.
type Options struct {
	Port     int    // 0: random
	StoreDir string // "" : a temporary directory removed on Shutdown
}

// Server is a running embedded NATS server.
type Server struct {
	ns      *server.Server
	tempDir string
}

// Start starts the server and waits until it accepts connections.
func Start(opts Options) (*Server, error) {
	s := &Server{}
	dir := opts.StoreDir
	if dir == "" {
		d, err := os.MkdirTemp("", "switchyard-nats-*")
		if err != nil {
			return nil, fmt.Errorf("nats store dir: %w", err)
		}
		dir, s.tempDir = d, d
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      port,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		s.cleanup()
		return nil, fmt.Errorf("nats server: not ready after 10s")
	}
	s.ns = ns
	return s, nil
}

// URL is the client URL, e.g. nats://127.0.0.1:41234.
func (s *Server) URL() string { return s.ns.ClientURL() }

// Shutdown stops the server and removes a temporary store.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.cleanup()
}

func (s *Server) cleanup() {
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
}
