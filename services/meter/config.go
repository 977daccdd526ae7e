package meter

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
)

// Config is the meter's configuration. Start from DefaultConfig or
// RegisterFlags.
type Config struct {
	// NATS is where the usage stream is consumed and the tenant feeds are
	// published. Required.
	NATS lifecycle.NATS
	// Redis holds the rollups and the counted request ids. Required: it
	// is what makes counting exactly-once across replicas and restarts.
	Redis lifecycle.Redis
	// HTTPAddr serves the usage API (GET /v1/usage), /metrics, /healthz
	// and /readyz.
	HTTPAddr string
	// ReplicaID names this replica to NATS; unique per replica.
	ReplicaID string
	// PolicydAddr is policyd's gRPC address. Set, the tenants and models
	// of its snapshot are the metrics' label values and the rollups'
	// models; anything else is "other" (bounded cardinality).
	PolicydAddr string
	Policyd     lifecycle.GRPCClient
	// Tenants and Models are label values known without policyd (comma
	// separated), added to policyd's.
	Tenants string
	Models  string
	// Batch is the most events fetched and counted at once; BatchWait, how
	// long a fetch waits to fill a batch.
	Batch     int
	BatchWait time.Duration
	// AckWait is how long JetStream waits for a batch's acks before it
	// delivers its events again (to this replica or another).
	AckWait time.Duration
	// DedupWindow is how long a counted request id is remembered: a copy
	// arriving later is counted again. Duplicates come from redelivery
	// (within AckWait) and a gateway re-sending after an outage (within
	// seconds of the stream's ack), so an hour is ample; memory is about
	// 50 bytes per request in the window.
	DedupWindow time.Duration
	// Retention of each resolution's buckets after their last write.
	RetainMinutes time.Duration
	RetainHours   time.Duration
	RetainDays    time.Duration
	// SummaryDelay is how long after a minute ends its summaries are
	// published, so that events finishing at its end are in them; 0 turns
	// summaries off.
	SummaryDelay time.Duration
	// OperatorTokenFile holds the bearer token the usage API requires.
	// Without it the API is served only on a loopback listen address.
	OperatorTokenFile string
	// KeyPrefix starts every Redis key (tests use their own).
	KeyPrefix string
	lifecycle.Stop
}

// Defaults.
const (
	DefaultBatch       = 512
	DefaultDedupWindow = time.Hour
)

// DefaultConfig returns the flag defaults. It listens on loopback, as
// `switchyard dev` does; a Deployment passes --http-addr=:9096.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		NATS:          lifecycle.NATS{URL: "nats://127.0.0.1:4222"},
		Redis:         lifecycle.Redis{URL: "redis://127.0.0.1:6379"},
		HTTPAddr:      "127.0.0.1:9096",
		ReplicaID:     host,
		Batch:         DefaultBatch,
		BatchWait:     100 * time.Millisecond,
		AckWait:       30 * time.Second,
		DedupWindow:   DefaultDedupWindow,
		RetainMinutes: 48 * time.Hour,
		RetainHours:   35 * 24 * time.Hour,
		RetainDays:    400 * 24 * time.Hour,
		SummaryDelay:  10 * time.Second,
		KeyPrefix:     rediskeys.UsagePrefix,
		Stop:          lifecycle.DefaultStop,
	}
}

// RegisterFlags registers the meter's flags on fs with DefaultConfig's
// values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	*c = d
	c.NATS.RegisterFlags(fs, d.NATS.URL, "the usage stream, the tenant feeds")
	c.Redis.RegisterFlags(fs, d.Redis.URL, "rollups and counted request ids; required")
	fs.StringVar(&c.HTTPAddr, "http-addr", d.HTTPAddr, "HTTP listen address (GET /v1/usage, /metrics, /healthz, /readyz); :9096 for every interface")
	fs.StringVar(&c.ReplicaID, "replica-id", d.ReplicaID, "this replica's name to NATS (the host name unless set)")
	fs.StringVar(&c.PolicydAddr, "policyd-addr", "", "policyd gRPC address (host:port): its tenants and models are the label values; anything else is \"other\"")
	c.Policyd.RegisterFlags(fs, "policyd", "policyd", "")
	fs.StringVar(&c.Tenants, "tenants", "", "tenant label values besides policyd's (comma separated)")
	fs.StringVar(&c.Models, "models", "", "model label values besides policyd's (comma separated)")
	fs.IntVar(&c.Batch, "batch", d.Batch, "most usage events fetched and counted at once")
	fs.DurationVar(&c.BatchWait, "batch-wait", d.BatchWait, "how long a fetch waits to fill a batch")
	fs.DurationVar(&c.AckWait, "ack-wait", d.AckWait, "how long JetStream waits for a batch's acks before delivering it again")
	fs.DurationVar(&c.DedupWindow, "dedup-window", d.DedupWindow, "how long a counted request id is remembered; a copy arriving later would be counted again (about 50 bytes of Redis per request)")
	fs.DurationVar(&c.RetainMinutes, "retention-minutes", d.RetainMinutes, "how long per-minute rollups are kept")
	fs.DurationVar(&c.RetainHours, "retention-hours", d.RetainHours, "how long hourly rollups are kept")
	fs.DurationVar(&c.RetainDays, "retention-days", d.RetainDays, "how long daily (UTC) rollups are kept")
	fs.DurationVar(&c.SummaryDelay, "summary-delay", d.SummaryDelay, "how long after a minute ends its per-tenant summaries are published (0: no summaries)")
	fs.StringVar(&c.OperatorTokenFile, "operator-token-file", "", "file holding the bearer token the usage API requires; without it the API is served only on a loopback --http-addr")
	c.Stop.RegisterFlags(fs, d.Stop)
}

// Validate reports every invalid setting.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.NATS.Validate(true), c.Redis.Validate(true), c.Stop.Validate(), c.Policyd.Validate("policyd"))
	if err := configcheck.ListenAddr(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("http-addr: %w", err))
	}
	if strings.TrimSpace(c.ReplicaID) == "" {
		errs = append(errs, errors.New("replica-id: empty (set it, or let it default to the hostname)"))
	}
	if c.PolicydAddr != "" {
		if _, _, err := net.SplitHostPort(c.PolicydAddr); err != nil {
			errs = append(errs, fmt.Errorf("policyd-addr: %q: want host:port: %w", c.PolicydAddr, err))
		}
	}
	if c.Batch < 1 || c.Batch > 10_000 {
		errs = append(errs, fmt.Errorf("batch %d: want 1 to 10000", c.Batch))
	}
	errs = append(errs, configcheck.Positive(
		configcheck.Duration{Name: "batch-wait", Value: c.BatchWait},
		configcheck.Duration{Name: "ack-wait", Value: c.AckWait},
		configcheck.Duration{Name: "dedup-window", Value: c.DedupWindow},
		configcheck.Duration{Name: "retention-minutes", Value: c.RetainMinutes},
		configcheck.Duration{Name: "retention-hours", Value: c.RetainHours},
		configcheck.Duration{Name: "retention-days", Value: c.RetainDays},
	)...)
	if c.AckWait > 0 && c.BatchWait >= c.AckWait {
		errs = append(errs, fmt.Errorf("batch-wait %s: must be below ack-wait %s", c.BatchWait, c.AckWait))
	}
	if c.SummaryDelay < 0 || c.SummaryDelay > 50*time.Minute {
		errs = append(errs, fmt.Errorf("summary-delay %s: want 0 (off) to 50m", c.SummaryDelay))
	}
	if c.RetainMinutes > 0 && c.SummaryDelay >= c.RetainMinutes {
		errs = append(errs, fmt.Errorf("summary-delay %s: must be below retention-minutes %s", c.SummaryDelay, c.RetainMinutes))
	}
	for _, v := range []struct{ name, list string }{{"tenants", c.Tenants}, {"models", c.Models}} {
		for n := range strings.SplitSeq(v.list, ",") {
			if n = strings.TrimSpace(n); len(n) > 253 {
				errs = append(errs, fmt.Errorf("%s: %q…: longer than 253 bytes", v.name, n[:32]))
			}
		}
	}
	if c.KeyPrefix == "" {
		errs = append(errs, errors.New("key prefix: empty"))
	}
	return errors.Join(errs...)
}
