package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/services/router"
)

// tcpProxy forwards a loopback port to a server until kill, which drops
// the listener and every connection at once (reset, not closed), as a
// killed process's would; revive listens on the same port again.
type tcpProxy struct {
	t      testing.TB
	addr   string
	target string
	bytes  atomic.Int64 // from clients
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newTCPProxy(t testing.TB, target string) *tcpProxy {
	p := &tcpProxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.kill)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(countingWriter{u, &p.bytes}, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n.Add(int64(n))
	return n, err
}

func (p *tcpProxy) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	p.conns = nil
}

func (p *tcpProxy) revive() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// startRouter runs a real router routing to workerURL, without NATS.
func startRouter(t testing.TB, workerURL string) *router.Server {
	rc := router.DefaultConfig()
	rc.GRPCAddr, rc.HTTPAddr, rc.NATS.URL, rc.Redis.URL = "127.0.0.1:0", "127.0.0.1:0", "", ""
	rc.Endpoints = "sim-0=" + workerURL
	rc.ScrapeInterval = 50 * time.Millisecond
	rc.ShutdownTimeout = 5 * time.Second
	srv, err := router.New(rc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, srv.Serve)
	return srv
}

func startSimWorker(t testing.TB) string {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sc := sim.DefaultConfig()
	sc.Port, sc.Workers, sc.TimeScale = 0, 1, 20
	sc.ShutdownTimeout = 5 * time.Second
	fleet, err := sim.StartFleet(ctx, sc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fleet.Close() })
	return fleet.Workers()[0].URL
}

const simChat = `{"model":"` + sim.DefaultServedModelName + `","messages":[{"role":"user","content":"hello there"}],"max_tokens":4}`

func (e *env) chatOK(t testing.TB) bool {
	req, _ := http.NewRequest(http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(simChat))
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Logf("request: %v", err)
		return false
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Logf("request: %d %s", resp.StatusCode, b)
		return false
	}
	return true
}

// TestRouterReplicaKilledMidLoad: a gateway naming two router replicas
// loses none of a steady load's requests when one replica is killed.
func TestRouterReplicaKilledMidLoad(t *testing.T) {
	worker := startSimWorker(t)
	ra, rb := startRouter(t, worker), startRouter(t, worker)
	pa, pb := newTCPProxy(t, ra.GRPCAddr()), newTCPProxy(t, rb.GRPCAddr())
	e := newEnv(t, envOpts{routerAddr: pa.addr + "," + pb.addr, noNATS: true})
	e.eventually(t, "requests served", func() bool { return e.chatOK(t) })

	var ok, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if e.chatOK(t) {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	e.eventually(t, "load on both replicas", func() bool { return ok.Load() >= 100 && pa.bytes.Load() > 0 && pb.bytes.Load() > 0 })
	t.Logf("before the kill: %d ok, proxies %d %d bytes", ok.Load(), pa.bytes.Load(), pb.bytes.Load())
	pa.kill()
	killedAt := ok.Load()
	e.eventually(t, "load after the kill", func() bool { return ok.Load() >= killedAt+200 })
	close(stop)
	wg.Wait()
	t.Logf("%d requests served, %d before the kill; %d failed", ok.Load(), killedAt, failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d requests failed with one of two routers killed", failed.Load())
	}
}

// TestRouterReturns: after its only router comes back, a gateway serves
// again within about routerMaxBackoff (gRPC's default backoff would have
// it wait for up to two minutes).
func TestRouterReturns(t *testing.T) {
	worker := startSimWorker(t)
	r := startRouter(t, worker)
	p := newTCPProxy(t, r.GRPCAddr())
	e := newEnv(t, envOpts{routerAddr: p.addr, noNATS: true})
	e.eventually(t, "requests served", func() bool { return e.chatOK(t) })
	p.kill()
	e.eventually(t, "the gateway not ready", func() bool {
		return testkit.HTTPStatus(t, e.url+"/readyz") == http.StatusServiceUnavailable
	})
	time.Sleep(4 * time.Second) // long enough for gRPC's default backoff to exceed 2 s
	p.revive()
	back := time.Now()
	e.eventually(t, "the gateway ready again", func() bool {
		return testkit.HTTPStatus(t, e.url+"/readyz") == http.StatusOK
	})
	t.Logf("ready %v after the router returned (4 s outage)", time.Since(back).Round(time.Millisecond))
	if !e.chatOK(t) {
		t.Error("request failed after the router returned")
	}
}
