package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Check is one thing a service depends on, probed on every /readyz and
// every gRPC health tick. A Required check that fails makes the service not
// ready (load balancers stop sending it work); an optional one that fails
// leaves it serving what it can and says what is missing, so an operator
// reading /readyz?verbose or the switchyard_dependency_up gauge sees a
// degraded service as degraded, not as healthy.
type Check struct {
	// Name is short and stable ("nats", "redis", "router", "leases"):
	// it is a metric label and a line in /readyz?verbose.
	Name string
	// Required says the service cannot take work without it.
	Required bool
	// Probe returns nil when the dependency is there, or why not. It is
	// called often and must be cheap: read state kept current elsewhere
	// (a connection's status, the age of the last event), never dial.
	Probe func() error
}

var checkName = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

// readiness is Ready and the Checks, answered together.
type readiness struct {
	ready  func() error
	checks []Check
}

func newReadiness(ready func() error, checks []Check) (*readiness, error) {
	if ready == nil {
		ready = func() error { return nil }
	}
	seen := map[string]bool{}
	var errs []error
	for i, c := range checks {
		switch {
		case !checkName.MatchString(c.Name):
			errs = append(errs, fmt.Errorf("check %d: name %q must match %s", i, c.Name, checkName))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("check %q registered twice", c.Name))
		case c.Probe == nil:
			errs = append(errs, fmt.Errorf("check %q has no probe", c.Name))
		}
		seen[c.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &readiness{ready: ready, checks: checks}, nil
}

// err is nil when the service can take work: Ready and every Required
// check pass.
func (r *readiness) err() error {
	if err := r.ready(); err != nil {
		return err
	}
	for _, c := range r.checks {
		if !c.Required {
			continue
		}
		if err := c.Probe(); err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// verbose writes every check, Kubernetes style ("[+]name ok",
// "[-]name: reason"), and returns whether the service is ready.
func (r *readiness) verbose(b *strings.Builder) bool {
	ok := true
	if err := r.ready(); err != nil {
		fmt.Fprintf(b, "[-]service: %v\n", err)
		ok = false
	} else {
		b.WriteString("[+]service ok\n")
	}
	for _, c := range r.checks {
		opt := ""
		if !c.Required {
			opt = " (optional)"
		}
		if err := c.Probe(); err != nil {
			fmt.Fprintf(b, "[-]%s%s: %v\n", c.Name, opt, err)
			if c.Required {
				ok = false
			}
			continue
		}
		fmt.Fprintf(b, "[+]%s%s ok\n", c.Name, opt)
	}
	return ok
}

// collectors exports each check as switchyard_dependency_up{check=...}.
func (r *readiness) collectors() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	for _, c := range r.checks {
		probe := c.Probe
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "switchyard_dependency_up",
			Help:        "1 when the named readiness check passes, 0 when it fails (see /readyz?verbose for why).",
			ConstLabels: prometheus.Labels{"check": c.Name, "required": fmt.Sprint(c.Required)},
		}, func() float64 {
			if probe() != nil {
				return 0
			}
			return 1
		}))
	}
	return reg
}

func (a *API) readyz(w http.ResponseWriter, req *http.Request) {
	if _, verbose := req.URL.Query()["verbose"]; verbose {
		var b strings.Builder
		ok := a.ready.verbose(&b)
		if a.stopping.Load() {
			b.WriteString("[-]shutting down\n")
			ok = false
		}
		code := http.StatusOK
		if ok {
			b.WriteString("readyz check passed\n")
		} else {
			b.WriteString("readyz check failed\n")
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(b.String()))
		return
	}
	if a.stopping.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if err := a.ready.err(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// Probe is nil while the connection is up, else its state; a nil
// connection (not dialled yet) is "not connected yet". Services keep their
// connection in an atomic pointer and hand `ptr.Load().Probe` to a Check.
func (c *NATSConn) Probe() error {
	if c == nil || c.Conn == nil {
		return errors.New("not connected yet")
	}
	if st := c.Status(); st != nats.CONNECTED {
		if err := c.LastError(); err != nil {
			return fmt.Errorf("%s (last error: %s)", strings.ToLower(st.String()), redactErr(err, c.ConnectedUrl()))
		}
		return errors.New(strings.ToLower(st.String()))
	}
	return nil
}

// RedisWatch pings a Redis client on a period so that a Check can say,
// without a network call of its own, whether Redis answers.
type RedisWatch struct {
	rdb      *redis.Client
	interval time.Duration
	last     atomic.Pointer[error]
}

// WatchRedis returns a watch of rdb; Run it as a component.
func WatchRedis(rdb *redis.Client) *RedisWatch {
	w := &RedisWatch{rdb: rdb, interval: 2 * time.Second}
	err := errors.New("not pinged yet")
	w.last.Store(&err)
	return w
}

// Run pings until ctx ends.
func (w *RedisWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, w.interval)
		err := w.rdb.Ping(pctx).Err()
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		w.last.Store(&err)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Probe is the last ping's error; nil-safe (no Redis configured is never
// asked about).
func (w *RedisWatch) Probe() error {
	if w == nil {
		return errors.New("not configured")
	}
	return *w.last.Load()
}
