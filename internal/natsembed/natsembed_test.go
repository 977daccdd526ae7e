package natsembed

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartServesJetStreamOnARandomLoopbackPort(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || strings.HasSuffix(s.URL(), ":4222") {
		t.Errorf("URL %q: want loopback and never the shared 4222", s.URL())
	}
	dir := s.tempDir
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	nc.Close()
	s.Shutdown()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary store %s left behind (%v)", dir, err)
	}
}

func TestStartKeepsAGivenStoreDir(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Options{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("caller's store dir removed: %v", err)
	}
}
