package policyd

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

const examplesDir = "../../deploy/examples"

// testLog writes to the test log only when -v.
func testLog(t *testing.T) zerolog.Logger {
	if testing.Verbose() {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return zerolog.Nop()
}

// copyExamples copies the dev catalog into a fresh directory.
func copyExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(examplesDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(examplesDir, p)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// startServer runs a policyd until the test ends and waits for Serve to
// return then.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	return startServerLog(t, cfg, testLog(t))
}

// startServerLog is startServer logging to log.
func startServerLog(t *testing.T, cfg Config, log zerolog.Logger) *Server {
	t.Helper()
	s, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, s.Serve)
	return s
}

func fileConfig(paths ...string) Config {
	cfg := DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Paths = paths
	cfg.PollInterval = 50 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

func dial(t *testing.T, addr string) policyv1.PolicyServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return policyv1.NewPolicyServiceClient(conn)
}

// eventually polls cond every 10ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, within, what, cond)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
