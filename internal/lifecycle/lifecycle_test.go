package lifecycle

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// order records what happened, in order.
type order struct {
	mu  sync.Mutex
	log []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log = append(o.log, s)
}

func (o *order) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.log, " ")
}

// component records its stop and, while it runs, accepts work.
func component(o *order, name string, alive *sync.Map) Component {
	return Component{Name: name, Run: func(ctx context.Context) error {
		alive.Store(name, true)
		<-ctx.Done()
		alive.Delete(name)
		o.add("stop " + name)
		return nil
	}}
}

// TestStopOrder: not ready first (while a request is still in flight),
// the drain delay, the servers (the in-flight request finishes, and the
// components it uses are still there), then the components in reverse.
func TestStopOrder(t *testing.T) {
	o := &order{}
	var alive sync.Map
	var ready error = errors.New("warming up")
	var readyMu sync.Mutex
	api, err := NewAPI(APIConfig{
		GRPCAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:0",
		Ready: func() error {
			readyMu.Lock()
			defer readyMu.Unlock()
			return ready
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	api.Mux.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, ok1 := alive.Load("nats")
		_, ok2 := alive.Load("publisher")
		o.add("request done")
		if !ok1 || !ok2 {
			http.Error(w, "a component stopped before the request finished", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	base := "http://" + api.HTTPAddr()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Service{
			Name: "test", Log: zerolog.Nop(), API: api,
			Components:      []Component{component(o, "nats", &alive), component(o, "publisher", &alive)},
			DrainDelay:      200 * time.Millisecond,
			ShutdownTimeout: 5 * time.Second,
		})
	}()

	if code := testkit.HTTPStatus(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz %d while not ready", code)
	}
	conn, err := grpc.NewClient(api.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	status := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			return healthpb.HealthCheckResponse_UNKNOWN
		}
		return r.GetStatus()
	}
	if st := status(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health %v while not ready", st)
	}
	readyMu.Lock()
	ready = nil
	readyMu.Unlock()
	testkit.Eventually(t, 5*time.Second, "health SERVING once ready", func() bool { return status() == healthpb.HealthCheckResponse_SERVING })
	if code := testkit.HTTPStatus(t, base+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz %d once ready", code)
	}

	slow := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		slow <- resp.Status + " " + string(b)
	}()
	<-entered
	cancel()
	// During the drain delay: up, not ready.
	testkit.Eventually(t, time.Second, "readyz 503 while draining", func() bool {
		return testkit.HTTPStatus(t, base+"/readyz") == http.StatusServiceUnavailable
	})
	o.add("not ready")
	close(release)
	if got := <-slow; got != "200 OK ok" {
		t.Errorf("in-flight request: %s", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := o.String(), "not ready request done stop publisher stop nats"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestComponentFailureStops: a failing component stops the service, in
// order, and Run says why.
func TestComponentFailureStops(t *testing.T) {
	o := &order{}
	var alive sync.Map
	api, err := NewAPI(APIConfig{HTTPAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = Run(context.Background(), Service{
		Name: "test", Log: zerolog.Nop(), API: api, ShutdownTimeout: 5 * time.Second,
		Components: []Component{
			component(o, "first", &alive),
			{Name: "broken", Run: func(context.Context) error { return boom }},
		},
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Run returned %v, want the broken component's error", err)
	}
	if o.String() != "stop first" {
		t.Errorf("order %q", o.String())
	}
	if _, err := http.Get("http://" + api.HTTPAddr() + "/healthz"); err == nil {
		t.Error("HTTP still served after Run returned")
	}
}

// TestStuckComponent: a component that ignores its context costs at most
// the shutdown timeout, and is reported.
func TestStuckComponent(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stuck := make(chan struct{})
	defer close(stuck)
	start := time.Now()
	err := Run(ctx, Service{
		Name: "test", Log: zerolog.Nop(), ShutdownTimeout: 100 * time.Millisecond,
		Components: []Component{{Name: "stuck", Run: func(context.Context) error { <-stuck; return nil }}},
	})
	if err == nil || !strings.Contains(err.Error(), "stuck: did not stop") {
		t.Errorf("Run returned %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestListenAndStopValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"good", errors.Join(Listen{GRPCAddr: "127.0.0.1:9090", HTTPAddr: ":9091"}.Validate(), Stop{ShutdownTimeout: time.Second}.Validate()), ""},
		{"bad addrs", Listen{GRPCAddr: "9090", HTTPAddr: ""}.Validate(), "grpc-addr"},
		{"bad http", Listen{GRPCAddr: ":1", HTTPAddr: "x:y"}.Validate(), "http-addr"},
		{"timeouts", Stop{ShutdownTimeout: 0, DrainDelay: -time.Second}.Validate(), "drain-delay"},
		{"nats required", NATS{}.Validate(true), "nats-url: required"},
		{"nats optional", NATS{}.Validate(false), ""},
		{"nats scheme", NATS{URL: "http://x:1"}.Validate(true), "scheme"},
		{"nats both creds", NATS{URL: "nats://x:1", Creds: "/nonexistent/a", NKey: "/nonexistent/b"}.Validate(true), "one or the other"},
		{"nats tls half", NATS{URL: "nats://x:1", TLS: TLS{Cert: "/nonexistent/c"}}.Validate(true), "give both or neither"},
		{"redis scheme", Redis{URL: "http://x"}.Validate(false), "scheme"},
		{"redis secret", Redis{URL: "ftp://user:hunter2@x"}.Validate(false), "REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.want == "" && tt.err != nil:
				t.Errorf("unexpected error %v", tt.err)
			case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
				t.Errorf("error %v, want it to mention %q", tt.err, tt.want)
			case tt.err != nil && strings.Contains(tt.err.Error(), "hunter2"):
				t.Errorf("error leaks the password: %v", tt.err)
			}
		})
	}
}
