package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestGRPCMutualTLS serves gRPC with --grpc-tls-* on loopback, certificates
// made by the test, and dials it with GRPCClient: a plain client, a client
// without a certificate and one whose certificate another CA signed are
// refused; the right certificate is served, and the token reaches the
// server.
func TestGRPCMutualTLS(t *testing.T) {
	ca, other := testkit.NewCA(t, "switchyard"), testkit.NewCA(t, "intruder")
	srvCert, srvKey := ca.Server(t)
	var mu sync.Mutex
	var gotAuth []string
	api, err := NewAPI(APIConfig{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		GRPCTLS: ServerTLS{Cert: srvCert, Key: srvKey, ClientCA: ca.File},
		GRPCOptions: []grpc.ServerOption{grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			mu.Lock()
			gotAuth = md.Get("authorization")
			mu.Unlock()
			return h(ctx, req)
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Service{Name: "tls", Log: zerolog.Nop(), API: api, ShutdownTimeout: 5 * time.Second})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	check := func(c GRPCClient) error {
		opts, err := c.DialOptions("router")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := grpc.NewClient(api.GRPCAddr(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		return err
	}
	goodCert, goodKey := ca.Client(t, "gateway")
	badCert, badKey := other.Client(t, "gateway")
	refused := []struct {
		name string
		c    GRPCClient
	}{
		{"plain gRPC", GRPCClient{}},
		{"TLS without a client certificate", GRPCClient{TLS: TLS{CA: ca.File}}},
		{"a client certificate from another CA", GRPCClient{TLS: TLS{CA: ca.File, Cert: badCert, Key: badKey}}},
		{"a server it does not trust", GRPCClient{TLS: TLS{CA: other.File, Cert: goodCert, Key: goodKey}}},
		{"the wrong server name", GRPCClient{TLS: TLS{CA: ca.File, Cert: goodCert, Key: goodKey}, ServerName: "policyd.example"}},
	}
	for _, r := range refused {
		if err := check(r.c); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the connection refused (Unavailable)", r.name, err)
		}
	}
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("  s3cret-s3cret-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := GRPCClient{TLS: TLS{CA: ca.File, Cert: goodCert, Key: goodKey}, ServerName: "localhost", TokenFile: tok}
	if err := good.Validate("router"); err != nil {
		t.Fatal(err)
	}
	if err := check(good); err != nil {
		t.Fatalf("the right certificate: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(gotAuth) != 1 || gotAuth[0] != "Bearer s3cret-s3cret-s3cret" {
		t.Fatalf("authorization metadata %q", gotAuth)
	}
}

func TestGRPCTLSValidate(t *testing.T) {
	ca := testkit.NewCA(t, "switchyard")
	cert, key := ca.Server(t)
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"mutual TLS", Listen{GRPCAddr: ":1", HTTPAddr: ":2", GRPCTLS: ServerTLS{Cert: cert, Key: key, ClientCA: ca.File}}.Validate(), ""},
		{"half a pair", Listen{GRPCAddr: ":1", HTTPAddr: ":2", GRPCTLS: ServerTLS{Cert: cert}}.Validate(), "grpc-tls-cert and grpc-tls-key"},
		{"client CA alone", Listen{GRPCAddr: ":1", HTTPAddr: ":2", GRPCTLS: ServerTLS{ClientCA: ca.File}}.Validate(), "grpc-tls-client-ca: needs"},
		{"missing file", Listen{GRPCAddr: ":1", HTTPAddr: ":2", GRPCTLS: ServerTLS{Cert: cert, Key: "/nonexistent/k"}}.Validate(), "grpc-tls-key"},
		{"client half a pair", GRPCClient{TLS: TLS{Cert: cert}}.Validate("router"), "router-tls-cert and router-tls-key"},
		{"short token", GRPCClient{TokenFile: short}.Validate("router"), "router-token-file"},
		{"plain", GRPCClient{}.Validate("router"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch {
			case tt.want == "" && tt.err != nil:
				t.Errorf("unexpected error %v", tt.err)
			case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
				t.Errorf("error %v, want it to mention %q", tt.err, tt.want)
			}
		})
	}
	// A key that is not the certificate's fails at start, naming the flags.
	_, otherKey := ca.Server(t)
	if _, err := (ServerTLS{Cert: cert, Key: otherKey}).Config(); err == nil || !strings.Contains(err.Error(), "grpc-tls-cert/grpc-tls-key") {
		t.Errorf("mismatched key: %v", err)
	}
	if _, err := (ServerTLS{Cert: cert, Key: key, ClientCA: short}).Config(); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("bad client CA: %v", err)
	}
}
