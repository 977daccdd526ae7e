// Package workers describes the vLLM workers a kvtracker ingests and reads
// them from static configuration: the YAML file given by --workers-file and
// the --workers shorthand. policyd's InferenceWorkerSets will later produce
// the same Spec values through another Source.
package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/switchyard-dev/switchyard/internal/bus"
)

// DefaultPool is the pool of a worker that names none.
const DefaultPool = "default"

// DefaultBlockSize is vLLM's default block size on CUDA.
const DefaultBlockSize = 16

// maxBlockSize bounds block_size; vLLM's largest is 256.
const maxBlockSize = 1 << 16

// Spec is one worker's KV event source.
type Spec struct {
	// ID names the worker as the router does (its endpoint id), in deltas,
	// Redis keys, metrics and the lease key.
	ID string `json:"id"`
	// Pool groups workers (an InferencePool); DefaultPool when empty.
	Pool string `json:"pool,omitempty"`
	// Model is the served model name carried in deltas and snapshots.
	Model string `json:"model,omitempty"`
	// KVEndpoint is the worker's PUB socket to connect to ("tcp://pod:5557").
	// Empty means the worker connects to the tracker's --bind socket and is
	// told apart by Topic.
	KVEndpoint string `json:"kvEndpoint,omitempty"`
	// ReplayEndpoint is the worker's replay ROUTER socket; empty: gaps can
	// not be replayed and reset the worker's state instead.
	ReplayEndpoint string `json:"replayEndpoint,omitempty"`
	// BlockSize is the worker's --block-size, used when an event carries
	// none.
	BlockSize int `json:"blockSize,omitempty"`
	// Topic is the worker's kv-events topic (a prefix filter when dialling,
	// the worker's identity on a bound socket).
	Topic string `json:"topic,omitempty"`
	// GPUBlocks is the worker's KV cache size in blocks, when known; it
	// turns cached blocks into a usage fraction in summaries.
	GPUBlocks int `json:"gpuBlocks,omitempty"`
}

// Key is the worker's identity across the system: pool and id.
func (s Spec) Key() string { return s.Pool + "/" + s.ID }

// Bound reports whether the worker publishes to the tracker's bound socket.
func (s Spec) Bound() bool { return s.KVEndpoint == "" }

// Defaults fill fields a shorthand entry cannot carry and a file entry
// leaves out.
type Defaults struct {
	Pool      string
	Model     string
	Topic     string
	BlockSize int
}

// ParseShorthand reads --workers: comma-separated entries
// id=kv_endpoint or id=kv_endpoint|replay_endpoint, e.g.
// "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558,w1=tcp://10.0.0.6:5557".
// An entry "id=" (no endpoint) is a worker that connects to --bind; its
// topic is then its id. Pool, model, topic and block size come from d.
func ParseShorthand(s string, d Defaults) ([]Spec, error) {
	var specs []Spec
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, eps, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("worker %d %q: want id=kv_endpoint[|replay_endpoint]", i+1, part)
		}
		kv, replay, _ := strings.Cut(eps, "|")
		spec := Spec{ID: strings.TrimSpace(id), KVEndpoint: strings.TrimSpace(kv), ReplayEndpoint: strings.TrimSpace(replay)}
		if spec.KVEndpoint == "" {
			spec.Topic = spec.ID
		}
		norm, err := normalize(spec, d)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		specs = append(specs, norm)
	}
	if err := checkUnique(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// ParseFile reads the --workers-file YAML: a list of Spec. Unknown fields
// are errors, so a misspelt key is not silently ignored.
func ParseFile(data []byte, d Defaults) ([]Spec, error) {
	var raw []Spec
	if err := yaml.UnmarshalStrict(data, &raw); err != nil {
		return nil, fmt.Errorf("parse workers yaml: %w", err)
	}
	return Normalize(raw, d)
}

// Normalize validates specs given in code, fills defaults and checks them
// together, as ParseFile does for a file's entries.
func Normalize(raw []Spec, d Defaults) ([]Spec, error) {
	specs := make([]Spec, 0, len(raw))
	for i, r := range raw {
		norm, err := normalize(r, d)
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i+1, err)
		}
		specs = append(specs, norm)
	}
	if err := checkUnique(specs); err != nil {
		return nil, err
	}
	return specs, nil
}

// Merge concatenates worker lists and checks them together.
func Merge(lists ...[]Spec) ([]Spec, error) {
	var all []Spec
	for _, l := range lists {
		all = append(all, l...)
	}
	if err := checkUnique(all); err != nil {
		return nil, err
	}
	return all, nil
}

// checkUnique rejects two workers that would share a NATS subject, lease
// key or Redis key, and two bound workers with one topic (they could not
// be told apart).
func checkUnique(specs []Spec) error {
	keys := make(map[string]string, len(specs))
	topics := map[string]string{}
	for _, s := range specs {
		// bus.Token folds '.' into '_', so "a.b" and "a_b" would share a
		// delta subject: compare what the bus sees.
		k := bus.KVDeltaSubject(s.Pool, s.ID)
		if prev, dup := keys[k]; dup {
			return fmt.Errorf("workers %q and %q collide (same pool and id once dots become underscores)", prev, s.Key())
		}
		keys[k] = s.Key()
		if s.Bound() {
			if prev, dup := topics[s.Topic]; dup {
				return fmt.Errorf("workers %q and %q connect to the bound socket with the same topic %q", prev, s.Key(), s.Topic)
			}
			topics[s.Topic] = s.Key()
		}
	}
	return nil
}

// normalize validates one spec and fills defaults.
func normalize(s Spec, d Defaults) (Spec, error) {
	if s.Pool == "" {
		s.Pool = d.Pool
	}
	if s.Pool == "" {
		s.Pool = DefaultPool
	}
	if s.Model == "" {
		s.Model = d.Model
	}
	if s.Topic == "" {
		s.Topic = d.Topic
	}
	if s.BlockSize == 0 {
		s.BlockSize = d.BlockSize
	}
	if s.BlockSize == 0 {
		s.BlockSize = DefaultBlockSize
	}
	if err := ValidateName("worker id", s.ID); err != nil {
		return s, err
	}
	if err := ValidateName("pool", s.Pool); err != nil {
		return s, fmt.Errorf("worker %q: %w", s.ID, err)
	}
	if strings.TrimSpace(s.Model) == "" || s.Model != strings.TrimSpace(s.Model) {
		return s, fmt.Errorf("worker %q: model %q: set a model name (or --model)", s.ID, s.Model)
	}
	if s.BlockSize < 1 || s.BlockSize > maxBlockSize {
		return s, fmt.Errorf("worker %q: block size %d: want 1-%d", s.ID, s.BlockSize, maxBlockSize)
	}
	if s.GPUBlocks < 0 {
		return s, fmt.Errorf("worker %q: gpuBlocks %d: must not be negative", s.ID, s.GPUBlocks)
	}
	if s.KVEndpoint != "" {
		if err := CheckDialEndpoint(s.KVEndpoint); err != nil {
			return s, fmt.Errorf("worker %q: kvEndpoint: %w", s.ID, err)
		}
	} else if s.Topic == "" {
		return s, fmt.Errorf("worker %q: no kvEndpoint, so it connects to --bind and needs a topic to be told apart", s.ID)
	}
	if s.ReplayEndpoint != "" {
		if err := CheckDialEndpoint(s.ReplayEndpoint); err != nil {
			return s, fmt.Errorf("worker %q: replayEndpoint: %w", s.ID, err)
		}
	}
	if len(s.Topic) > 256 {
		return s, fmt.Errorf("worker %q: topic longer than 256 bytes", s.ID)
	}
	return s, nil
}

// ValidateName accepts worker ids and pool names made of letters, digits
// and . _ - /, so a name is safe in subjects, NATS KV keys, Redis keys and
// metric labels. (The router also allows ':', which NATS KV keys do not.)
func ValidateName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(name) > 128 {
		return fmt.Errorf("%s %.20q...: longer than 128 bytes", what, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == '/':
		default:
			return fmt.Errorf("%s %q: character %q not allowed (letters, digits and . _ - / only)", what, name, c)
		}
	}
	return nil
}

// CheckDialEndpoint accepts an endpoint a ZMQ socket can connect to:
// tcp://host:port with a numeric port, ipc://path or inproc://name.
func CheckDialEndpoint(ep string) error {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" {
		return fmt.Errorf("%q: want tcp://host:port, ipc://path or inproc://name", ep)
	}
	switch scheme {
	case "tcp":
		i := strings.LastIndexByte(rest, ':')
		if i <= 0 {
			return fmt.Errorf("%q: want tcp://host:port", ep)
		}
		host := rest[:i]
		if strings.ContainsAny(host, "* \t/") {
			return fmt.Errorf("%q: host %q cannot be dialled", ep, host)
		}
		if p, err := strconv.ParseUint(rest[i+1:], 10, 16); err != nil || p == 0 {
			return fmt.Errorf("%q: port %q: want 1-65535", ep, rest[i+1:])
		}
	case "ipc", "inproc":
	default:
		return fmt.Errorf("%q: unsupported transport %q (tcp, ipc or inproc)", ep, scheme)
	}
	return nil
}

// Static is a worker source whose set never changes.
type Static []Spec

// Watch reports the set once and then waits for ctx to end: the contract
// a dynamic source also follows (update gets the full set on each change).
func (s Static) Watch(ctx context.Context, update func([]Spec)) error {
	update(slices.Clone(s))
	<-ctx.Done()
	return nil
}

// ErrNoWorkers is returned when the configuration lists no worker.
var ErrNoWorkers = errors.New("no workers: set --workers id=tcp://host:port,... or --workers-file")
