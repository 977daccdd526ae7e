package policyd

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// The Kubernetes source is registered by the binary; without it (a
// `-tags nokube` build, or any program that does not register it),
// --source kubernetes is refused with what to do, never accepted and
// ignored.
func TestSourceRegistry(t *testing.T) {
	cfg := fileConfig(t.TempDir())
	cfg.Source = SourceKubernetes
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "without Kubernetes support") || !strings.Contains(err.Error(), "nokube") {
		t.Errorf("kubernetes unregistered: %v", err)
	}
	cfg.Source = "etcd"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"etcd": want one of files`) {
		t.Errorf("unknown source: %v", err)
	}

	// A name of its own each run (-count): a registry is never emptied.
	name := "test-source-" + strconv.Itoa(int(testSources.Add(1)))
	ran := make(chan struct{})
	RegisterSource(name, func(c Config, _ zerolog.Logger) (Source, error) {
		return sourceFunc(func(ctx context.Context, apply ApplyFunc) error {
			close(ran)
			<-ctx.Done()
			return nil
		}), nil
	})
	cfg.Source = name
	if err := cfg.Validate(); err != nil {
		t.Fatalf("registered source refused: %v", err)
	}
	startServer(t, cfg)
	<-ran

	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	RegisterSource(SourceFiles, newFileSource)
}

var testSources atomic.Int32

type sourceFunc func(ctx context.Context, apply ApplyFunc) error

func (f sourceFunc) Run(ctx context.Context, apply ApplyFunc) error { return f(ctx, apply) }
