package policyd

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/registry"
)

// Source is where the resources policyd compiles come from. Run calls
// apply with every distinct set of resources it reads, valid or not,
// until ctx ends.
//
// Files are built in. Kubernetes (services/policyd/kube) is registered by
// the switchyard binary rather than imported here, so that only the binary
// links client-go: nothing else that embeds policyd (switchyard dev, the
// tests) compiles or links it, and `go build -tags nokube` leaves it out.
type Source interface {
	Run(ctx context.Context, apply ApplyFunc) error
}

// ApplyFunc compiles one read of the resources and reports what came of
// it.
type ApplyFunc func(objs []*policy.Object, diags policy.Diagnostics) Result

// Result is what one apply did.
type Result struct {
	Applied   bool // a new revision is served
	Unchanged bool // valid, and compiles to the snapshot already served
	// Revision is the revision served after the apply; 0 before the first
	// valid set.
	Revision int64
	Diags    policy.Diagnostics
	// Served is the snapshot served after the apply (nil before the first
	// valid set), and Generations the generations of the resources in it
	// ("Kind ns/name" → generation): a valid resource that is already
	// served stays accepted while another one is invalid.
	Served      *policy.Snapshot
	Generations map[string]int64
}

// SourceFactory builds the source cfg.Source names.
type SourceFactory func(cfg Config, log zerolog.Logger) (Source, error)

// sources are the registered sources; files is built in.
var sources = func() *registry.Registry[SourceFactory] {
	r := registry.New[SourceFactory]("source")
	r.Register(SourceFiles, newFileSource)
	return r
}()

// RegisterSource makes a source available to --source under name.
// Registering a name twice is a programming error and panics.
func RegisterSource(name string, f SourceFactory) { sources.Register(name, f) }

// Sources lists the registered source names, sorted.
func Sources() []string { return sources.Names() }

func sourceFactory(name string) (SourceFactory, bool) {
	f, err := sources.Lookup(name)
	return f, err == nil
}
