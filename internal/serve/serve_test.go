package serve

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestGRPCForcesAfterDeadline: a Watch stream that never ends would hold a
// graceful stop forever; past the deadline it is cut.
func TestGRPCForcesAfterDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = GRPC(srv, ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := healthpb.NewHealthClient(conn).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		StopGRPC(srv, time.Now().Add(100*time.Millisecond), zerolog.Nop())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("GRPC did not force the stop after the deadline")
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("stream still open after the forced stop")
	}
}

func TestHTTPWaitsForInFlightRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release, entered := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = w.Write([]byte("ok"))
	})}
	go func() { _ = HTTP(srv, ln) }()
	got := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	<-entered
	done := make(chan struct{})
	go func() {
		StopHTTP(srv, time.Now().Add(10*time.Second), zerolog.Nop())
		close(done)
	}()
	close(release)
	if err := <-got; err != nil {
		t.Errorf("in-flight request failed during shutdown: %v", err)
	}
	<-done
}
