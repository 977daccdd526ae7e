package policysource_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// worker is one static worker of the test catalog's worker set.
type worker struct{ id, url, kv, replay string }

// catalogDir is a policyd files-mode directory the test edits under a
// running fleet: one InferencePool, one InferenceWorkerSet, and optionally
// a provider.
type catalogDir struct {
	t        *testing.T
	dir      string
	model    string
	provider string // base URL; empty: no provider
}

func newCatalogDir(t *testing.T, model string) *catalogDir {
	return &catalogDir{t: t, dir: t.TempDir(), model: model}
}

// write replaces the catalog with the given workers. The file is renamed
// into place, so policyd never reads half of it.
func (c *catalogDir) write(workers ...worker) {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: switchyard.dev/v1alpha1
kind: InferencePool
metadata: {name: gpus, namespace: test}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceWorkerSet
metadata: {name: workers, namespace: test}
spec:
  model: %s
  pool: gpus
  blockSize: 16
  static:
`, c.model)
	for _, w := range workers {
		fmt.Fprintf(&b, "  - {id: %s, url: %q", w.id, w.url)
		if w.kv != "" {
			fmt.Fprintf(&b, ", kvEventsEndpoint: %q", w.kv)
		}
		if w.replay != "" {
			fmt.Fprintf(&b, ", kvReplayEndpoint: %q", w.replay)
		}
		b.WriteString("}\n")
	}
	if c.provider != "" {
		fmt.Fprintf(&b, `---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: cloud, namespace: test}
spec:
  type: OpenAICompatible
  baseURL: %s
  credentials: {env: CLOUD_API_KEY}
  models: [{name: %s}]
`, c.provider, c.model)
	}
	tmp := filepath.Join(c.dir, ".catalog.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "catalog.yaml")); err != nil {
		c.t.Fatal(err)
	}
}

// startPolicyd runs policyd in files mode on dir until the test ends.
func startPolicyd(t *testing.T, dir string, log zerolog.Logger) *policyd.Server {
	t.Helper()
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Paths = []string{dir}
	cfg.PollInterval = 50 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	s, err := policyd.New(cfg, log.With().Str("service", "policyd").Logger())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, s.Serve)
	return s
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func policyClient(t *testing.T, addr string) policyv1.PolicyServiceClient {
	return policyv1.NewPolicyServiceClient(dial(t, addr))
}

// testLog writes warnings to the test log, everything with -v.
func testLog(t *testing.T) zerolog.Logger {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if testing.Verbose() {
		log = log.Level(zerolog.DebugLevel)
	}
	return log
}
