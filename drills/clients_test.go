package drills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/bus"
)

// slowConn is a client connection that trickles its request; closed is
// when the gateway answered or closed it (zero until then).
type slowConn struct {
	c      net.Conn
	mu     sync.Mutex
	closed time.Time
	// answer is the start of the gateway's answer ("" if it just closed).
	answer string
}

func (s *slowConn) closedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// trickle opens a connection to addr, writes head at once, then one byte
// of rest every interval until the gateway answers or closes the
// connection, or stop is closed. It notes when the gateway did.
func trickle(t *testing.T, addr, head, rest string, interval time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) *slowConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	s := &slowConn{c: c}
	_, err = io.WriteString(c, head)
	must(t, err)
	wg.Go(func() {
		// The first byte of an answer, or the close, ends the wait.
		b := make([]byte, 12)
		n, _ := io.ReadFull(c, b)
		s.mu.Lock()
		s.closed, s.answer = time.Now(), string(b[:n])
		s.mu.Unlock()
	})
	wg.Go(func() {
		defer c.Close()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			if !s.closedAt().IsZero() {
				return
			}
			if _, err := io.WriteString(c, rest[i%len(rest):i%len(rest)+1]); err != nil {
				return
			}
		}
	})
	return s
}

// TestSlowClients: 100 clients trickle their request headers a byte a
// second (slowloris) while the steady load runs. The load is not
// disturbed and the gateways close every slow connection by their header
// timeout (10 s).
func TestSlowClients(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, f.gateways...)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	var conns []*slowConn
	t0 := time.Now()
	for i := range 100 {
		addr := strings.TrimPrefix(f.gateways[i%len(f.gateways)].httpURL, "http://")
		conns = append(conns, trickle(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\n",
			"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", time.Second, stop, &wg))
	}
	const bound = 15 * time.Second
	took := until(t, t0, bound+5*time.Second, "the gateways close every slow connection", func() bool {
		for _, c := range conns {
			if c.closedAt().IsZero() {
				return false
			}
		}
		return true
	})
	answers := map[string]int{}
	for _, c := range conns {
		c.mu.Lock()
		answers[strconv.Quote(c.answer)]++
		c.mu.Unlock()
	}
	t.Logf("the gateways' answers to the slow clients: %v", answers)
	mem.back(t, time.Now(), 32*mib)
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the slow clients")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "100 clients sending request headers a byte a second",
		client:   "the steady load undisturbed",
		recovery: "every slow connection closed by the gateways (from the first byte)",
		took:     took, bound: bound,
	})
}

// smallWindow dials with a 4 KiB receive buffer, so a client that stops
// reading pushes back on the gateway soon.
var smallWindow = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	return errors.Join(err, serr)
}}

// TestNonReadingClients: 32 clients start long streams and never read
// them while the steady load runs, then go away. The load is not
// disturbed, the gateways' memory stays bounded, and once the clients
// are gone their streams stop on the workers and are metered as closed
// by the client.
func TestNonReadingClients(t *testing.T) {
	f := startFleet(t, defaultOptions())
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, f.gateways...)

	const n = 32
	c := &http.Client{Transport: &http.Transport{DialContext: smallWindow.DialContext, MaxConnsPerHost: 0, DisableKeepAlives: true}}
	body := `{"model":"` + model + `","stream":true,"max_tokens":4000,"messages":[{"role":"user","content":"Tell me everything."}]}`
	var resps []*http.Response
	var ids []record
	t0 := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.gateways[i%len(f.gateways)].httpURL+"/v1/chat/completions", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		must(t, err)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("non-reading stream %d: status %s", i, resp.Status)
		}
		resps = append(resps, resp)
		ids = append(ids, record{id: resp.Header.Get("X-Request-Id"), start: time.Now(), outcome: cut})
	}
	// Hold them unread while the load goes on.
	l.waitRequests(t, 12, 60*time.Second)
	for _, g := range f.gateways {
		h, err := g.heapInuse()
		must(t, err)
		if h > mem.before[g].heap+64*mib {
			t.Errorf("%s: heap %.0f MiB with %d unread streams (%.0f MiB before)", g.name, h/mib, n, mem.before[g].heap/mib)
		}
	}
	t1 := time.Now()
	cancel()
	for _, r := range resps {
		r.Body.Close()
	}
	took := until(t, t1, 30*time.Second, "the abandoned streams stop on the workers", func() bool {
		var running float64
		for _, w := range f.workers {
			running += w.running()
		}
		return running <= 4
	})
	mem.back(t, time.Now(), 32*mib)
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the non-reading clients")
	usage := checkUsage(t, f, append(l.snapshot(), ids...), 30*time.Second)
	for _, r := range ids {
		if ev := usage[r.id]; ev != nil && ev.GetOutcome() != bus.UsageOutcomeClientClosed {
			t.Errorf("abandoned stream %s: usage outcome %q, want %q", r.id, ev.GetOutcome(), bus.UsageOutcomeClientClosed)
		}
	}
	report(t, result{
		fault:    fmt.Sprintf("%d streams of 4000 tokens never read (4 KiB receive window), then abandoned", n),
		client:   "the steady load undisturbed; the gateways' heap within 64 MiB meanwhile",
		recovery: "the abandoned streams stopped on the workers, metered as closed by the client",
		took:     took, bound: 5 * time.Second,
	})
}

// fromIP dials from another loopback address: another client, to the
// gateway's per-client limits.
func fromIP(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

// TestGreedyClient: with --max-streams-per-client 16, one client (its
// own address) asks for 200 long streams at once while the steady load
// runs. Each gateway serves it 16 and refuses the rest with a 429 in the
// OpenAI shape; the steady load's first tokens stay fast; once the greedy
// client goes, its streams stop on the workers.
func TestGreedyClient(t *testing.T) {
	o := defaultOptions()
	o.gatewayArgs = []string{"--max-streams-per-client", "16"}
	f := startFleet(t, o)
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)

	c := &http.Client{Transport: &http.Transport{DialContext: fromIP("127.0.0.2").DialContext, MaxConnsPerHost: 0, DisableKeepAlives: true}}
	body := `{"model":"` + model + `","stream":true,"max_tokens":2000,"messages":[{"role":"user","content":"Tell me everything."}]}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var accepted []*http.Response
	var ids []record
	refused := map[int]int{}
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range 200 {
		wg.Go(func() {
			g := f.gateways[i%len(f.gateways)]
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.httpURL+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := c.Do(req)
			if err != nil {
				t.Errorf("greedy stream %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode == http.StatusOK {
				accepted = append(accepted, resp)
				ids = append(ids, record{id: resp.Header.Get("X-Request-Id"), start: time.Now(), outcome: cut})
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			refused[resp.StatusCode]++
			if resp.StatusCode != http.StatusTooManyRequests || !openAIError(b) || resp.Header.Get("Retry-After") == "" {
				t.Errorf("greedy stream %d: status %d, Retry-After %q, body %.200q; want 429 with Retry-After and an OpenAI error", i, resp.StatusCode, resp.Header.Get("Retry-After"), b)
			}
		})
	}
	wg.Wait()
	if want := 16 * len(f.gateways); len(accepted) != want {
		t.Errorf("greedy client: %d streams served, want %d (16 per gateway); refused %v", len(accepted), want, refused)
	}
	// Its streams go on while the load's requests are measured.
	t1 := time.Now()
	l.waitRequests(t, 12, 60*time.Second)
	var slowest time.Duration
	for _, r := range between(l.snapshot(), t1, time.Now()) {
		if !r.firstToken.IsZero() {
			slowest = max(slowest, r.firstToken.Sub(r.start))
		}
	}
	t.Logf("greedy client: %d served, refused %v; the steady load's slowest first token meanwhile %v", len(accepted), refused, slowest.Round(time.Millisecond))
	if slowest > 2*time.Second {
		t.Errorf("the steady load's first tokens took up to %v beside the greedy client", slowest)
	}
	t2 := time.Now()
	cancel()
	for _, r := range accepted {
		r.Body.Close()
	}
	took := until(t, t2, 30*time.Second, "the greedy client's streams stop on the workers", func() bool {
		var running float64
		for _, w := range f.workers {
			running += w.running()
		}
		return running <= 4
	})
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the greedy client")
	checkUsage(t, f, append(l.snapshot(), ids...), 30*time.Second)
	report(t, result{
		fault:    "one client asks for 200 streams of 2000 tokens at once (--max-streams-per-client 16)",
		client:   fmt.Sprintf("it is served 16 per gateway, the rest 429 with Retry-After; the steady load's first tokens within 2 s (slowest %s)", fmtDur(slowest.Round(time.Millisecond))),
		recovery: "the greedy client's streams stopped on the workers once it left",
		took:     took, bound: 5 * time.Second,
	})
}

// TestSlowBodies: 32 clients send a 4 KiB body a byte a second and 32
// declare a body just under the limit (8 MiB) and send a few bytes. The
// gateways hold what arrived, not what was declared, and answer every one
// 408 once --body-read-timeout (5 s here) is up, closing the connection;
// the steady load is not disturbed.
func TestSlowBodies(t *testing.T) {
	const timeout = 5 * time.Second
	o := defaultOptions()
	o.gatewayArgs = []string{"--body-read-timeout", timeout.String()}
	f := startFleet(t, o)
	l := startLoad(t, f, 4)
	l.waitRequests(t, 8, 30*time.Second)
	mem := watchMemory(t, f.gateways...)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	t.Cleanup(func() { close(stop); wg.Wait() })
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + strings.Repeat("a", 4096) + `"}]}`
	var conns []*slowConn
	t0 := time.Now()
	for i := range 64 {
		addr := strings.TrimPrefix(f.gateways[i%len(f.gateways)].httpURL, "http://")
		size := len(body)
		if i%2 == 1 {
			size = 8<<20 - 1
		}
		head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		conns = append(conns, trickle(t, addr, head, body, time.Second, stop, &wg))
	}
	time.Sleep(timeout / 2)
	for _, g := range f.gateways {
		h, err := g.heapInuse()
		must(t, err)
		t.Logf("%s: heap %.0f MiB with 32 slow bodies of 8 MiB declared (%.0f MiB before)", g.name, h/mib, mem.before[g].heap/mib)
		if h > mem.before[g].heap+64*mib {
			t.Errorf("%s: heap %.0f MiB with slow bodies (%.0f before): the declared sizes were allocated", g.name, h/mib, mem.before[g].heap/mib)
		}
	}
	bound := timeout + 5*time.Second
	took := until(t, t0, bound+5*time.Second, "the gateways answer every slow body", func() bool {
		for _, c := range conns {
			if c.closedAt().IsZero() {
				return false
			}
		}
		return true
	})
	for _, c := range conns {
		c.mu.Lock()
		if c.answer != "HTTP/1.1 408" {
			t.Errorf("slow body answered %q, want HTTP/1.1 408", c.answer)
		}
		c.mu.Unlock()
	}
	l.waitRequests(t, 8, 30*time.Second)
	l.stop()
	steady(t, l, t0, time.Now(), "load beside the slow bodies")
	checkUsage(t, f, l.snapshot(), 30*time.Second)
	report(t, result{
		fault:    "32 bodies of 4 KiB sent a byte a second, 32 declaring 8 MiB and sending a few bytes",
		client:   "each answered 408 at --body-read-timeout (5 s) and closed; the gateways' heap within 64 MiB meanwhile; the steady load undisturbed",
		recovery: "every slow body answered (from its headers)",
		took:     took, bound: bound,
	})
}
