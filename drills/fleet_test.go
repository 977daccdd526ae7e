package drills

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	flagLong    = flag.Bool("drills.long", false, "run the long variants too (outages and timeouts of a minute and more)")
	flagResults = flag.String("drills.results", "", "write the table of drills and their measured recovery times to this Markdown file")
	flagReadme  = flag.String("drills.readme", "", "also put the table between the drills markers of this README")
	flagLogs    = flag.String("drills.logs", "", "keep every process's log under this directory (default: printed only when a drill fails)")
)

// bins are the binaries TestMain builds once for every drill.
var bins struct {
	switchyard, natsd string
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// End-to-end drills are skipped with -short: nothing to build.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "switchyard-drills-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "drills:", err)
		os.Exit(1)
	}
	bins.switchyard = filepath.Join(dir, "switchyard")
	bins.natsd = filepath.Join(dir, "natsd")
	for _, b := range []struct{ out, pkg string }{
		{bins.switchyard, "github.com/switchyard-dev/switchyard/cmd/switchyard"},
		{bins.natsd, "github.com/switchyard-dev/switchyard/drills/internal/natsd"},
	} {
		cmd := exec.Command(goBin(), "build", "-o", b.out, b.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "drills: build %s: %v\n", b.pkg, err)
			_ = os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	if code == 0 && *flagResults != "" {
		if err := writeResults(*flagResults); err != nil {
			fmt.Fprintln(os.Stderr, "drills:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// goBin is the go command that runs this test (GOROOT/bin/go), or the
// one on PATH.
func goBin() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// proc is one process of the fleet. It can be killed, frozen, thawed and
// started again with the same arguments (same ports, same store): what a
// pod restart looks like to the rest of the fleet.
type proc struct {
	name    string
	bin     string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// ready, when set, sees every output line until it returns true;
	// readyCh is closed then.
	ready   func(line string) bool
	readyCh chan struct{}
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "--- %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.bin, p.args...)
	// A test killed without cleanup (a timeout panic) takes its fleet with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	readyCh := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.readyCh = cmd, done, readyCh
	p.mu.Unlock()
	scan := p.ready
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = f.WriteString(line + "\n")
			if scan != nil && scan(line) {
				scan = nil
				close(readyCh)
			}
		}
		_, _ = io.Copy(f, pr)
	}()
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(f, "--- %s exit %s: %v\n", time.Now().UTC().Format(time.RFC3339Nano), p.name, err)
		pw.Close()
		f.Close()
		close(done)
	}()
	return nil
}

func (p *proc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// running says whether the process has not exited.
func (p *proc) running() bool {
	_, done := p.current()
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int {
	cmd, _ := p.current()
	return cmd.Process.Pid
}

func (p *proc) signal(sig syscall.Signal) error {
	cmd, _ := p.current()
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: %v: %w", p.name, sig, err)
	}
	return nil
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	_, done := p.current()
	<-done
	return nil
}

// stop asks the process to stop (SIGTERM, SIGCONT in case it is frozen)
// and kills it after timeout.
func (p *proc) stop(timeout time.Duration) {
	if !p.running() {
		return
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGTERM)
	_, done := p.current()
	select {
	case <-done:
	case <-time.After(timeout):
		_ = p.kill()
	}
}

// rss is the process's resident set in bytes, from /proc.
func (p *proc) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("%s: no VmRSS", p.name)
}

// tail is the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// service is a Switchyard process with an HTTP port (/readyz, /metrics).
type service struct {
	*proc
	// httpURL serves /readyz and /metrics (the gateway's: its API too,
	// and its /metrics is on metricsURL).
	httpURL string
	// metricsURL is a gateway's /metrics, on a port of its own.
	metricsURL string
	// grpcAddr is a router's gRPC address.
	grpcAddr string
	// pprof says whether it serves Go's profiles (and so collects its
	// garbage when asked).
	pprof bool
}

// worker is one simulated vLLM worker: `switchyard sim --workers 1`, its
// own process so a drill can kill or freeze it alone, unless
// options.workersPerSim puts several in one process (proc is then shared
// by them).
type worker struct {
	*proc
	id, url, kv, replay string
}

// options shape a fleet.
type options struct {
	workers int
	// workersPerSim is how many workers each `switchyard sim` process
	// runs (`--workers N`, on consecutive ports); 0 is 1. workers must be
	// a multiple of it.
	workersPerSim int
	// routers and trackers are how many router and kvtracker replicas
	// run; 0 is 2 routers and 1 kvtracker.
	routers, trackers int
	// gatewayRouters lists, per gateway, the routers it is given (indexes
	// into the fleet's two).
	gatewayRouters [][]int
	// natsDown starts every service while NATS is not there (it is
	// started later with fleet.restart); startFleet then waits for the
	// routers' and gateways' readiness and the kvtracker's liveness.
	natsDown bool
	// badKV lists workers described to the routers and the kvtracker
	// with a KV event endpoint nothing listens on (a worker whose
	// endpoint connects instead of binding, a wrong port).
	badKV []int
	// trackerArgs, routerArgs, gatewayArgs, simArgs are extra flags.
	trackerArgs, routerArgs, gatewayArgs, simArgs []string
}

func defaultOptions() options {
	return options{
		workers:        3,
		gatewayRouters: [][]int{{0, 1}, {1, 0}},
	}
}

// fleet is Switchyard on loopback as separate processes: its own NATS
// (JetStream, file store kept across restarts) and Redis, simulated
// workers, one kvtracker, two routers, two gateways (each with a usage
// spool) and a meter.
type fleet struct {
	t        *testing.T
	dir      string
	model    string
	nats     *proc
	natsURL  string
	redis    *proc
	redisURL string
	workers  []*worker
	// tracker is trackers[0]; options.trackers > 1 starts more replicas,
	// which share the workers through their NATS leases.
	tracker  *service
	trackers []*service
	meter    *service
	routers  []*service
	gateways []*service
	procs    []*proc
	// rollupsLost is set when Redis came back empty: the meter's counts
	// of before went with it, and checkUsage compares no totals.
	rollupsLost bool
	started     time.Time
}

const model = "drill-model"

// startFleet starts every process, waits until each is ready, and stops
// them all when the test ends (printing their logs' tails if it failed).
func startFleet(t *testing.T, o options) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("drills run a fleet of processes; skipped with -short")
	}
	redisBin := findRedis(t)
	dir := t.TempDir()
	if *flagLogs != "" {
		dir = filepath.Join(*flagLogs, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		_ = os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := &fleet{t: t, dir: dir, model: model, started: time.Now()}
	t.Cleanup(f.shutdown)

	natsPort := freePort(t)
	f.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	f.nats = f.add("nats", bins.natsd, []string{"--port", strconv.Itoa(natsPort), "--store", filepath.Join(t.TempDir(), "jetstream")})
	f.nats.ready = func(line string) bool { return strings.HasPrefix(line, "ready ") }

	redisPort := freePort(t)
	f.redisURL = fmt.Sprintf("redis://127.0.0.1:%d", redisPort)
	f.redis = f.add("redis", redisBin, []string{"--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loglevel", "notice"})
	f.redis.ready = func(line string) bool { return strings.Contains(line, "Ready to accept connections") }

	var endpoints []string
	perSim := max(o.workersPerSim, 1)
	if o.workers%perSim != 0 {
		t.Fatalf("options: %d workers are not a multiple of %d per sim process", o.workers, perSim)
	}
	for i := range o.workers {
		if perSim > 1 {
			if i%perSim == 0 {
				f.addSims(i/perSim, perSim, o)
			}
			w := f.workers[i]
			endpoints = append(endpoints, w.id+"="+w.url+"|"+w.kv+"|"+w.replay)
			continue
		}
		port, kv, replay := freePort(t), freePort(t), freePort(t)
		w := &worker{
			id:     fmt.Sprintf("sim-%d", i),
			url:    fmt.Sprintf("http://127.0.0.1:%d", port),
			kv:     fmt.Sprintf("tcp://127.0.0.1:%d", kv),
			replay: fmt.Sprintf("tcp://127.0.0.1:%d", replay),
		}
		args := append([]string{"sim", "--workers", "1", "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--served-model-name", model, "--log-format", "json",
			"--kv-events-config", fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d"}`, kv, replay),
		}, o.simArgs...)
		w.proc = f.add(w.id, bins.switchyard, args)
		if slices.Contains(o.badKV, i) {
			w.kv = fmt.Sprintf("tcp://127.0.0.1:%d", freePort(t))
		}
		f.workers = append(f.workers, w)
		endpoints = append(endpoints, w.id+"="+w.url+"|"+w.kv+"|"+w.replay)
	}

	for i := range max(o.trackers, 1) {
		name, id := "kvtracker", "drill-kvtracker"
		if i > 0 {
			name, id = fmt.Sprintf("kvtracker-%d", i), fmt.Sprintf("drill-kvtracker-%d", i)
		}
		tr := &service{httpURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
		tr.proc = f.add(name, bins.switchyard, append([]string{"kvtracker",
			// The routers' description of the workers: the API URL lets the
			// tracker notice a restarted worker by its process start time.
			"--workers", strings.Join(endpoints, ","), "--model", model,
			"--nats-url", f.natsURL, "--redis-url", f.redisURL,
			"--http-addr", tr.httpURL[len("http://"):], "--replica-id", id,
			"--snapshot-interval", "1s", "--log-format", "json",
		}, o.trackerArgs...))
		f.trackers = append(f.trackers, tr)
	}
	f.tracker = f.trackers[0]

	mport := freePort(t)
	f.meter = &service{httpURL: fmt.Sprintf("http://127.0.0.1:%d", mport)}
	f.meter.proc = f.add("meter", bins.switchyard, []string{"meter",
		"--nats-url", f.natsURL, "--redis-url", f.redisURL, "--models", model,
		"--http-addr", f.meter.httpURL[len("http://"):], "--replica-id", "drill-meter",
		"--ack-wait", "5s", "--log-format", "json",
	})

	routers := o.routers
	if routers == 0 {
		routers = 2
	}
	for i := range routers {
		g, h := freePort(t), freePort(t)
		r := &service{grpcAddr: fmt.Sprintf("127.0.0.1:%d", g), httpURL: fmt.Sprintf("http://127.0.0.1:%d", h), pprof: true}
		r.proc = f.add(fmt.Sprintf("router-%d", i), bins.switchyard, append([]string{"router",
			"--endpoints", strings.Join(endpoints, ","),
			"--grpc-addr", r.grpcAddr, "--http-addr", r.httpURL[len("http://"):],
			"--nats-url", f.natsURL, "--redis-url", f.redisURL,
			"--router-id", fmt.Sprintf("drill-router-%d", i), "--scrape-interval", "250ms", "--log-format", "json",
			// A drill asks for a garbage collection (/debug/pprof/heap?gc=1)
			// before it reads what the heap holds.
			"--pprof",
		}, o.routerArgs...))
		f.routers = append(f.routers, r)
	}
	for i, rs := range o.gatewayRouters {
		var addrs []string
		for _, r := range rs {
			addrs = append(addrs, f.routers[r].grpcAddr)
		}
		p, m := freePort(t), freePort(t)
		g := &service{httpURL: fmt.Sprintf("http://127.0.0.1:%d", p), metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", m)}
		g.proc = f.add(fmt.Sprintf("gateway-%d", i), bins.switchyard, append([]string{"gateway",
			"--addr", g.httpURL[len("http://"):], "--metrics-addr", g.metricsURL[len("http://") : len(g.metricsURL)-len("/metrics")],
			"--router-addr", strings.Join(addrs, ","),
			"--nats-url", f.natsURL, "--log-format", "json",
			// Kept across the gateway's restarts: what it held is sent when
			// it starts again.
			"--usage-spool-dir", filepath.Join(dir, fmt.Sprintf("gateway-%d-spool", i)),
		}, o.gatewayArgs...))
		f.gateways = append(f.gateways, g)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deps := []*proc{f.nats, f.redis}
	if o.natsDown {
		deps = deps[1:]
	}
	for _, p := range deps {
		f.must(p.start())
		f.must(waitLine(ctx, p))
	}
	for i, w := range f.workers {
		if i%perSim == 0 {
			f.must(w.start())
		}
	}
	for _, w := range f.workers {
		f.must(waitHTTP(ctx, w.proc, w.url+"/health"))
	}
	for _, tr := range f.trackers {
		f.must(tr.start())
	}
	f.must(f.meter.start())
	for _, s := range append(f.routers, f.gateways...) {
		f.must(s.start())
	}
	for _, s := range f.services() {
		probe := "/readyz"
		if o.natsDown && (slices.Contains(f.trackers, s) || s == f.meter) {
			// It cannot hold leases without NATS: alive is all it can be.
			probe = "/healthz"
		}
		f.must(waitHTTP(ctx, s.proc, s.httpURL+probe))
	}
	return f
}

// addSims adds sim process n, running perSim workers (sim-<n*perSim>
// and on) on consecutive HTTP, KV event and replay ports, as `switchyard
// sim --workers N` gives them.
func (f *fleet) addSims(n, perSim int, o options) {
	port, kv, replay := freePorts(f.t, perSim), freePorts(f.t, perSim), freePorts(f.t, perSim)
	args := append([]string{"sim", "--workers", strconv.Itoa(perSim), "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--served-model-name", model, "--log-format", "json",
		"--kv-events-config", fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d"}`, kv, replay),
	}, o.simArgs...)
	p := f.add(fmt.Sprintf("sim-proc-%d", n), bins.switchyard, args)
	for j := range perSim {
		f.workers = append(f.workers, &worker{
			proc:   p,
			id:     fmt.Sprintf("sim-%d", n*perSim+j),
			url:    fmt.Sprintf("http://127.0.0.1:%d", port+j),
			kv:     fmt.Sprintf("tcp://127.0.0.1:%d", kv+j),
			replay: fmt.Sprintf("tcp://127.0.0.1:%d", replay+j),
		})
	}
}

// ports hands out the fleet's ports, each once per test binary.
var ports struct {
	sync.Mutex
	used map[int]bool
}

// freePort is a loopback port nothing listens on now, below Linux's
// ephemeral range (32768 and up), so that no outgoing connection takes
// it before the process meant to listen there starts — or restarts,
// after a kill, on the same port. It is never handed out twice.
func freePort(t *testing.T) int {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if ports.used[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		ports.used[p] = true
		return p
	}
	t.Fatal("no free loopback port in 20000-31999")
	return 0
}

// freePorts is the first of n consecutive loopback ports, each free as
// freePort's.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	if n == 1 {
		return freePort(t)
	}
	ports.Lock()
	defer ports.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
next:
	for range 1000 {
		base := 20000 + rand.IntN(12000-n)
		for p := base; p < base+n; p++ {
			if ports.used[p] {
				continue next
			}
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue next
			}
			ln.Close()
		}
		for p := base; p < base+n; p++ {
			ports.used[p] = true
		}
		return base
	}
	t.Fatalf("no %d consecutive free loopback ports in 20000-31999", n)
	return 0
}

func findRedis(t *testing.T) string {
	for _, p := range []string{"redis-server", "/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if b, err := exec.LookPath(p); err == nil {
			return b
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("redis-server not found: the drills run their own Redis")
	}
	t.Skip("redis-server not found: the drills run their own Redis")
	return ""
}

func (f *fleet) add(name, bin string, args []string) *proc {
	p := &proc{name: name, bin: bin, args: args, logPath: filepath.Join(f.dir, name+".log")}
	f.procs = append(f.procs, p)
	return p
}

func (f *fleet) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// services are the Switchyard processes with a /readyz.
func (f *fleet) services() []*service {
	return append(append(append(slices.Clone(f.trackers), f.meter), f.routers...), f.gateways...)
}

func (f *fleet) shutdown() {
	// Gateways first, then what they depend on, as a deployment would.
	for i := len(f.procs) - 1; i >= 0; i-- {
		if p := f.procs[i]; p.cmd != nil {
			p.stop(10 * time.Second)
		}
	}
	if f.t.Failed() {
		for _, p := range f.procs {
			if p.cmd != nil {
				f.t.Logf("--- %s (%s), last lines:\n%s", p.name, p.logPath, p.tail(25))
			}
		}
	}
}

// restart starts a killed process again with the same arguments and waits
// until it is ready.
func (f *fleet) restart(p *proc, readyURL string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.must(p.start())
	if readyURL != "" {
		f.must(waitHTTP(ctx, p, readyURL))
	} else {
		f.must(waitLine(ctx, p))
	}
}

func waitLine(ctx context.Context, p *proc) error {
	_, done := p.current()
	select {
	case <-p.readyCh:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready:\n%s", p.name, p.tail(15))
	case <-ctx.Done():
		return fmt.Errorf("%s not ready: %w\n%s", p.name, ctx.Err(), p.tail(15))
	}
}

// waitHTTP polls url until it answers 200.
func waitHTTP(ctx context.Context, p *proc, url string) error {
	_, done := p.current()
	var last string
	for {
		if code, err := get(url); err != nil {
			last = err.Error()
		} else if code == http.StatusOK {
			return nil
		} else {
			last = strconv.Itoa(code)
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before %s answered:\n%s", p.name, url, p.tail(15))
		case <-ctx.Done():
			return fmt.Errorf("%s: %s: %w (last: %s)\n%s", p.name, url, ctx.Err(), last, p.tail(15))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second}

func get(url string) (int, error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ready says whether every Switchyard service answers /readyz with 200.
func (f *fleet) ready(svcs ...*service) bool {
	if len(svcs) == 0 {
		svcs = f.services()
	}
	for _, s := range svcs {
		if code, err := get(s.httpURL + "/readyz"); err != nil || code != http.StatusOK {
			return false
		}
	}
	return true
}

// metric is the sum of a Prometheus metric's samples at url whose label
// sets hold every one of labels (`name="value"`); ok is false when the
// page has none.
func metric(url, name string, labels ...string) (v float64, ok bool, err error) {
	resp, err := probeClient.Get(url)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		matched := true
		for _, l := range labels {
			if !strings.Contains(line[len(name):sp], l) {
				matched = false
			}
		}
		if !matched {
			continue
		}
		x, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		v, ok = v+x, true
	}
	return v, ok, sc.Err()
}

// collect makes a service that serves Go's profiles collect its garbage
// now (a no-op for one that does not).
func (s *service) collect() {
	_, _ = get(s.httpURL + "/debug/pprof/heap?gc=1")
}

// heapInuse is a service's Go heap in use, from its /metrics.
func (s *service) heapInuse() (float64, error) {
	page := s.metricsURL
	if page == "" {
		page = s.httpURL + "/metrics"
	}
	v, ok, err := metric(page, "go_memstats_heap_inuse_bytes")
	if err == nil && !ok {
		err = fmt.Errorf("%s: no go_memstats_heap_inuse_bytes on /metrics", s.name)
	}
	return v, err
}
