package kvtracker

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
)

// WorkerSpec is one worker given in code (Config.WorkerSpecs); the
// tracker reads its KV endpoint, replay endpoint, topic, pool, model,
// block size and GPU blocks.
type WorkerSpec = fleet.Worker

// Config is the kvtracker's configuration. Start from DefaultConfig or
// RegisterFlags.
type Config struct {
	// WorkersFile is a YAML list of workers (fleet.ParseYAML), the format
	// of the router's --endpoints-file too.
	WorkersFile string
	// Workers lists workers in the fleet shorthand (fleet.ParseShorthand),
	// "id=tcp://host:port[|tcp://host:replayport],..."; the router's
	// --endpoints takes the same line.
	Workers string
	// WorkerSpecs are workers given in code, merged with the two above.
	WorkerSpecs []WorkerSpec
	// PolicydAddr is policyd's gRPC address. Set, the tracker follows
	// policyd's catalog as the router does: the workers of every
	// InferenceWorkerSet with a KV event endpoint join the static ones,
	// and a worker leaving the catalog is released.
	PolicydAddr string
	// Policyd is how policyd is dialled: TLS, mutual with a client
	// certificate (--policyd-tls-ca, -cert, -key, -server-name).
	Policyd lifecycle.GRPCClient
	// Defaults for workers that leave these out.
	Pool      string
	Model     string
	Topic     string
	BlockSize int
	// Bind, when set, is an endpoint the tracker binds one SUB socket on
	// for workers that connect to it (workers without a kvEndpoint; they
	// are told apart by topic). Port 0 or * picks a free port.
	Bind string
	// NATS is where deltas, summaries and leases go. Required.
	NATS lifecycle.NATS
	// Redis is where snapshots and summaries are stored; an empty URL
	// disables them (routers then cannot start mid-stream).
	Redis lifecycle.Redis
	// ReplicaID names this replica in leases; unique per replica.
	ReplicaID string
	// HTTPAddr serves /metrics, /healthz and /readyz.
	HTTPAddr         string
	SnapshotInterval time.Duration
	SummaryInterval  time.Duration
	// ReplayTimeout bounds one replay request to a worker.
	ReplayTimeout time.Duration
	// SilenceWarning is how long a worker's KV endpoint may refuse the
	// tracker, or its stream carry no event, before a warning is logged
	// and /readyz?verbose names the worker (the optional kv-events check).
	SilenceWarning time.Duration
	// RestartCheckInterval is how often the metrics of a worker with an API
	// URL are read for its process start time (process_start_time_seconds),
	// and read again at once when its KV event connection drops: a new
	// start is a restarted worker, whose blocks are dropped before its
	// first event. 0 turns it off (a restart then shows at the worker's
	// first event, as for workers without a URL).
	RestartCheckInterval time.Duration
	// Stop: the shutdown timeout and drain delay.
	lifecycle.Stop
}

// DefaultConfig returns the flag defaults, without workers. It listens on
// loopback, as `switchyard dev` does: a tracker started by hand is not
// exposed to the network; a Deployment passes --http-addr=:9095.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Pool:                 fleet.DefaultPool,
		BlockSize:            fleet.DefaultBlockSize,
		NATS:                 lifecycle.NATS{URL: "nats://127.0.0.1:4222"},
		Redis:                lifecycle.Redis{URL: "redis://127.0.0.1:6379"},
		ReplicaID:            host,
		HTTPAddr:             "127.0.0.1:9095",
		SnapshotInterval:     10 * time.Second,
		SummaryInterval:      5 * time.Second,
		ReplayTimeout:        10 * time.Second,
		SilenceWarning:       time.Minute,
		RestartCheckInterval: 2 * time.Second,
		Stop:                 lifecycle.DefaultStop,
	}
}

// RegisterFlags registers the kvtracker's flags on fs with DefaultConfig's
// values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.WorkersFile, "workers-file", "", "YAML file listing workers (the router's --endpoints-file format): "+fleet.YAMLKeys)
	fs.StringVar(&c.Workers, "workers", "", `workers as id=kv_endpoint[|replay_endpoint],... e.g. "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558"; "id=" is a worker connecting to --bind with topic id; the router's --endpoints syntax: `+fleet.ShorthandSyntax)
	fs.StringVar(&c.PolicydAddr, "policyd-addr", "", "policyd gRPC address (host:port): follow its InferenceWorkerSets' workers (those with a KV event endpoint), as the router does")
	c.Policyd.RegisterFlags(fs, "policyd", "policyd", "")
	fs.StringVar(&c.Pool, "pool", d.Pool, "pool of workers that name none")
	fs.StringVar(&c.Model, "model", "", "model of workers that name none")
	fs.StringVar(&c.Topic, "topic", "", "kv events topic of workers that name none (vLLM's kv-events-config topic)")
	fs.IntVar(&c.BlockSize, "block-size", d.BlockSize, "block size of workers that name none (vLLM --block-size)")
	fs.StringVar(&c.Bind, "bind", "", "bind one SUB socket here for workers that connect to the tracker (e.g. tcp://*:5557); empty: dial every worker")
	c.NATS.RegisterFlags(fs, d.NATS.URL, "deltas, summaries, leases")
	c.Redis.RegisterFlags(fs, d.Redis.URL, "snapshots and summaries; empty disables them")
	fs.StringVar(&c.ReplicaID, "replica-id", d.ReplicaID, "this replica's id in worker leases (the host name unless set)")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address (/metrics, /healthz, /readyz); :9095 for every interface")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", d.SnapshotInterval, "how often each worker's block set is written to Redis (also on every epoch change)")
	fs.DurationVar(&c.SummaryInterval, "summary-interval", d.SummaryInterval, "how often each worker's summary is published to NATS and Redis")
	fs.DurationVar(&c.ReplayTimeout, "replay-timeout", d.ReplayTimeout, "deadline of one replay request to a worker's replay endpoint")
	fs.DurationVar(&c.SilenceWarning, "silence-warning", d.SilenceWarning, "warn, and name the worker in /readyz?verbose, when its KV event endpoint refuses the tracker or its stream carries no event for this long")
	fs.DurationVar(&c.RestartCheckInterval, "restart-check-interval", d.RestartCheckInterval, "how often a worker's metrics (on its API URL) are read for its process start time, and at once when its KV event connection drops: a restarted worker's blocks are dropped before its first event; 0 turns it off")
	c.Stop.RegisterFlags(fs, d.Stop)
}

// Validate checks the configuration, including that the workers parse.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.NATS.Validate(true), c.Redis.Validate(false), c.Stop.Validate())
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
	)...)
	errs = append(errs, c.Policyd.Validate("policyd"))
	if c.RestartCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("restart-check-interval: %s: want 0 (off) or more", c.RestartCheckInterval))
	}
	if c.PolicydAddr != "" {
		if _, _, err := net.SplitHostPort(c.PolicydAddr); err != nil {
			errs = append(errs, fmt.Errorf("policyd-addr: %q: want host:port: %w", c.PolicydAddr, err))
		}
	}
	if _, err := c.staticCatalog(); err != nil {
		errs = append(errs, err)
	}
	if c.Bind != "" {
		if !strings.HasPrefix(c.Bind, "tcp://") && !strings.HasPrefix(c.Bind, "ipc://") && !strings.HasPrefix(c.Bind, "inproc://") {
			errs = append(errs, fmt.Errorf("bind %q: want tcp://host:port, ipc://path or inproc://name", c.Bind))
		}
	}
	return errors.Join(errs...)
}

// staticCatalog reads --workers, --workers-file and WorkerSpecs together,
// each worker filled from the defaults (--pool, --model, --topic,
// --block-size), and checks that the tracker can ingest every one.
func (c *Config) staticCatalog() (fleet.Catalog, error) {
	d := fleet.Defaults{Pool: c.Pool, Model: c.Model, Topic: c.Topic, BlockSize: c.BlockSize}
	var all []fleet.Worker
	if strings.TrimSpace(c.Workers) != "" {
		short, err := fleet.ParseShorthand(c.Workers, d)
		if err != nil {
			return fleet.Catalog{}, fmt.Errorf("workers: %w", err)
		}
		all = append(all, short...)
	}
	if c.WorkersFile != "" {
		data, err := os.ReadFile(c.WorkersFile)
		if err != nil {
			return fleet.Catalog{}, fmt.Errorf("workers-file: %w", err)
		}
		file, err := fleet.ParseYAML(data, d)
		if err != nil {
			return fleet.Catalog{}, fmt.Errorf("workers-file %s: %w", c.WorkersFile, err)
		}
		all = append(all, file...)
	}
	for _, w := range c.WorkerSpecs {
		d.Apply(&w)
		all = append(all, w)
	}
	cat, err := fleet.NewCatalog(all, nil)
	if err != nil {
		return fleet.Catalog{}, fmt.Errorf("workers: %w", err)
	}
	var errs []error
	for _, w := range cat.Workers {
		if w.KVEndpoint == "" && c.Bind == "" {
			errs = append(errs, fmt.Errorf("worker %q has no kvEndpoint: set one, or --bind for workers that connect to the tracker", w.Key()))
		} else if w.KVEndpoint == "" && w.Topic == "" {
			errs = append(errs, fmt.Errorf("worker %q has no kvEndpoint, so it connects to --bind and needs a topic to be told apart", w.Key()))
		}
	}
	if len(errs) == 0 {
		_, errs = tracked(cat, c.Bind != "")
	}
	if cat.Len() == 0 && c.PolicydAddr == "" {
		errs = append(errs, ErrNoWorkers)
	}
	return cat, errors.Join(errs...)
}

// ErrNoWorkers is returned when the configuration gives no worker and no
// policyd to take them from.
var ErrNoWorkers = errors.New("no workers: set --workers id=tcp://host:port,..., --workers-file, or --policyd-addr")

// tracked picks the catalog's workers whose KV events the tracker reads:
// those with a KV event endpoint (it dials them), and with --bind those
// without one that have a topic to be told apart by on the bound socket.
// Others publish no KV events (a worker set without kvEvents) and are
// skipped. problems are the workers it cannot ingest: no model for their
// deltas, or a bound topic already taken.
func tracked(c fleet.Catalog, bind bool) (ws []fleet.Worker, problems []error) {
	topics := map[string]string{}
	for _, w := range c.Workers {
		switch {
		case w.KVEndpoint == "" && (!bind || w.Topic == ""):
			continue
		case w.Model() == "":
			problems = append(problems, fmt.Errorf("worker %q: no model for its KV deltas (list one, or set --model)", w.Key()))
			continue
		case bound(w):
			if prev, dup := topics[w.Topic]; dup {
				problems = append(problems, fmt.Errorf("workers %q and %q connect to the bound socket with the same topic %q", prev, w.Key(), w.Topic))
				continue
			}
			topics[w.Topic] = w.Key()
		}
		ws = append(ws, w)
	}
	return ws, problems
}

// bound reports whether a tracked worker connects to the tracker's --bind
// socket (rather than being dialled).
func bound(w fleet.Worker) bool { return w.KVEndpoint == "" }
