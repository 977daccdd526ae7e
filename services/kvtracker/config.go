package kvtracker

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/workers"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
)

// WorkerSpec is one worker whose KV events the tracker ingests; see the
// field comments for the --workers-file keys.
type WorkerSpec = workers.Spec

// Config is the kvtracker's configuration. Start from DefaultConfig or
// RegisterFlags.
type Config struct {
	// WorkersFile is a YAML list of WorkerSpec.
	WorkersFile string
	// Workers is the shorthand "id=tcp://host:port[|tcp://host:replayport],...".
	Workers string
	// WorkerSpecs are workers given in code (switchyard dev), merged with
	// the two above.
	WorkerSpecs []WorkerSpec
	// Defaults for workers that leave these out.
	Pool      string
	Model     string
	Topic     string
	BlockSize int
	// Bind, when set, is an endpoint the tracker binds one SUB socket on
	// for workers that connect to it (workers without a kvEndpoint; they
	// are told apart by topic). Port 0 or * picks a free port.
	Bind string
	// NATSURL is where deltas, summaries and leases go. Required.
	NATSURL string
	// RedisURL is where snapshots and summaries are stored; empty disables
	// them (routers then cannot start mid-stream).
	RedisURL string
	// ReplicaID names this replica in leases; unique per replica.
	ReplicaID string
	// HTTPAddr serves /metrics, /healthz and /readyz.
	HTTPAddr         string
	SnapshotInterval time.Duration
	SummaryInterval  time.Duration
	// ReplayTimeout bounds one replay request to a worker.
	ReplayTimeout time.Duration
	// SilenceWarning is how long a worker's KV endpoint may refuse the
	// tracker, or its stream carry no event, before a warning is logged.
	SilenceWarning  time.Duration
	ShutdownTimeout time.Duration
}

// DefaultConfig returns the flag defaults, without workers. It listens on
// loopback, as `switchyard dev` does: a tracker started by hand is not
// exposed to the network; a Deployment passes --http-addr=:9095.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Pool:             workers.DefaultPool,
		BlockSize:        workers.DefaultBlockSize,
		NATSURL:          "nats://127.0.0.1:4222",
		RedisURL:         "redis://127.0.0.1:6379",
		ReplicaID:        host,
		HTTPAddr:         "127.0.0.1:9095",
		SnapshotInterval: 10 * time.Second,
		SummaryInterval:  5 * time.Second,
		ReplayTimeout:    10 * time.Second,
		SilenceWarning:   time.Minute,
		ShutdownTimeout:  10 * time.Second,
	}
}

// RegisterFlags registers the kvtracker's flags on fs with DefaultConfig's
// values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.WorkersFile, "workers-file", "", "YAML file listing workers: [{id, pool, model, kvEndpoint, replayEndpoint, blockSize, topic, gpuBlocks}]")
	fs.StringVar(&c.Workers, "workers", "", `workers as id=kv_endpoint[|replay_endpoint],... e.g. "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558"; "id=" is a worker connecting to --bind with topic id`)
	fs.StringVar(&c.Pool, "pool", d.Pool, "pool of workers that name none")
	fs.StringVar(&c.Model, "model", "", "model of workers that name none")
	fs.StringVar(&c.Topic, "topic", "", "kv events topic of workers that name none (vLLM's kv-events-config topic)")
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "block size of workers that name none (vLLM --block-size)")
	fs.StringVar(&c.Bind, "bind", "", "bind one SUB socket here for workers that connect to the tracker (e.g. tcp://*:5557); empty: dial every worker")
	fs.StringVar(&c.NATSURL, "nats-url", d.NATSURL, "NATS server URL (deltas, summaries, leases)")
	fs.StringVar(&c.RedisURL, "redis-url", d.RedisURL, "Redis URL for snapshots and summaries; empty disables them")
	fs.StringVar(&c.ReplicaID, "replica-id", d.ReplicaID, "this replica's id in worker leases (the host name unless set)")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address (/metrics, /healthz, /readyz); :9095 for every interface")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", d.SnapshotInterval, "how often each worker's block set is written to Redis (also on every epoch change)")
	fs.DurationVar(&c.SummaryInterval, "summary-interval", d.SummaryInterval, "how often each worker's summary is published to NATS and Redis")
	fs.DurationVar(&c.ReplayTimeout, "replay-timeout", d.ReplayTimeout, "deadline of one replay request to a worker's replay endpoint")
	fs.DurationVar(&c.SilenceWarning, "silence-warning", d.SilenceWarning, "warn when a worker's KV event endpoint refuses the tracker, or its stream carries no event, for this long")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "hard deadline for graceful shutdown")
}

// Validate checks the configuration, including that the workers parse.
func (c *Config) Validate() error {
	var errs []error
	if c.NATSURL == "" {
		errs = append(errs, errors.New("nats-url: required (deltas and leases go through NATS)"))
	} else if err := configcheck.URLList(c.NATSURL, configcheck.NATSSchemes...); err != nil {
		errs = append(errs, fmt.Errorf("nats-url: %w", err))
	}
	if c.RedisURL != "" {
		if err := configcheck.URLList(c.RedisURL, configcheck.RedisSchemes...); err != nil {
			errs = append(errs, fmt.Errorf("redis-url: %w", err))
		}
	}
	if strings.TrimSpace(c.ReplicaID) == "" {
		errs = append(errs, errors.New("replica-id: empty (set it, or let it default to the hostname)"))
	}
	if err := configcheck.ListenAddr(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr: %w", err))
	}
	errs = append(errs, configcheck.Positive(
		configcheck.Duration{Name: "snapshot-interval", Value: c.SnapshotInterval},
		configcheck.Duration{Name: "summary-interval", Value: c.SummaryInterval},
		configcheck.Duration{Name: "replay-timeout", Value: c.ReplayTimeout},
		configcheck.Duration{Name: "silence-warning", Value: c.SilenceWarning},
		configcheck.Duration{Name: "shutdown-timeout", Value: c.ShutdownTimeout},
	)...)
	specs, err := c.workerSpecs()
	if err != nil {
		errs = append(errs, err)
	}
	if c.Bind != "" {
		if !strings.HasPrefix(c.Bind, "tcp://") && !strings.HasPrefix(c.Bind, "ipc://") && !strings.HasPrefix(c.Bind, "inproc://") {
			errs = append(errs, fmt.Errorf("bind %q: want tcp://host:port, ipc://path or inproc://name", c.Bind))
		}
	} else {
		for _, s := range specs {
			if s.Bound() {
				errs = append(errs, fmt.Errorf("worker %q has no kvEndpoint: set one, or --bind for workers that connect to the tracker", s.Key()))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// workerSpecs parses --workers, --workers-file and WorkerSpecs together.
func (c *Config) workerSpecs() ([]workers.Spec, error) {
	d := workers.Defaults{Pool: c.Pool, Model: c.Model, Topic: c.Topic, BlockSize: c.BlockSize}
	var short, file []workers.Spec
	if strings.TrimSpace(c.Workers) != "" {
		var err error
		if short, err = workers.ParseShorthand(c.Workers, d); err != nil {
			return nil, fmt.Errorf("workers: %w", err)
		}
	}
	if c.WorkersFile != "" {
		data, err := os.ReadFile(c.WorkersFile)
		if err != nil {
			return nil, fmt.Errorf("workers-file: %w", err)
		}
		if file, err = workers.ParseFile(data, d); err != nil {
			return nil, fmt.Errorf("workers-file %s: %w", c.WorkersFile, err)
		}
	}
	given, err := workers.Normalize(c.WorkerSpecs, d)
	if err != nil {
		return nil, fmt.Errorf("worker specs: %w", err)
	}
	all, err := workers.Merge(short, file, given)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	if len(all) == 0 {
		return nil, workers.ErrNoWorkers
	}
	return all, nil
}
