package runner

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/pick"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/stream"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

func smallSpec(kind workload.Kind) workload.Spec {
	s := workload.DefaultSpec(kind)
	s.OutputTokens = workload.Const(3)
	s.PromptTokens = workload.Const(50)
	s.PrefixTokens = workload.Const(50)
	s.SuffixTokens = workload.Const(5)
	s.SystemTokens = workload.Const(20)
	s.UserTokens = workload.Const(5)
	s.Turns = workload.Const(3)
	s.AnswerTokens = workload.Const(3)
	return s
}

type env struct {
	srvs []*fakeoai.Server
	env  Env
}

func newEnv(t *testing.T, n int, strategy string, script func(fakeoai.Request) fakeoai.Script) *env {
	t.Helper()
	e := &env{}
	var pts []pick.Target
	for i := range n {
		s := fakeoai.New(script)
		t.Cleanup(s.Close)
		e.srvs = append(e.srvs, s)
		id := fmt.Sprintf("w%d", i)
		e.env.Targets = append(e.env.Targets, Target{ID: id, APIBase: s.URL + "/v1"})
		pts = append(pts, pick.Target{ID: id, URL: s.URL})
	}
	p, err := pick.New(strategy, pts, pick.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.env.Picker = p
	e.env.Client = stream.NewClient(8)
	return e
}

func plan(mode Mode, kind workload.Kind) Plan {
	return Plan{Workload: string(kind), Strategy: "test", Mode: mode, Concurrency: 4, Rate: 200, Requests: 20,
		TimeScale: 10, Model: "m", RequestTimeout: 10 * time.Second, Seed: 1}
}

func TestRequestBound(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		kind workload.Kind
	}{
		{Concurrent, workload.Control},
		{Concurrent, workload.SharedPrefix},
		{Concurrent, workload.MultiTurn},
		{Poisson, workload.Control},
		{Poisson, workload.MultiTurn},
		{Constant, workload.SharedPrefix},
		{Constant, workload.MultiTurn},
	} {
		t.Run(fmt.Sprintf("%s/%s", tc.mode, tc.kind), func(t *testing.T) {
			e := newEnv(t, 2, results.RoundRobin, fakeoai.Echo)
			gen, _ := workload.NewGenerator(smallSpec(tc.kind))
			var done sync.Map
			var n int
			var mu sync.Mutex
			e.env.OnDone = func(r *results.Record) {
				mu.Lock()
				n++
				mu.Unlock()
				done.Store(fmt.Sprint(r.Session, "/", r.Turn), true)
			}
			recs, err := Run(context.Background(), plan(tc.mode, tc.kind), gen, e.env)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 20 || n != 20 {
				t.Fatalf("%d records, %d callbacks; want 20", len(recs), n)
			}
			seen := len(e.srvs[0].Seen()) + len(e.srvs[1].Seen())
			if seen != 20 {
				t.Errorf("servers saw %d requests, want 20", seen)
			}
			for _, r := range recs {
				if !r.OK() {
					t.Fatalf("request failed: %s", r.Error)
				}
				if r.Chunks != 3 || r.CompletionTokens != 3 || r.Target == "" || r.Workload != string(tc.kind) {
					t.Errorf("record %+v", r)
				}
				if !r.TTFTS.Valid() || r.TTFTS != r.WallTTFTS*10 || r.E2ES < r.TTFTS {
					t.Errorf("timings ttft %v wall %v e2e %v", r.TTFTS, r.WallTTFTS, r.E2ES)
				}
				if tc.mode.Open() && (r.Rate != 200 || r.Concurrency != 0) {
					t.Errorf("poisson record with rate %v concurrency %d", r.Rate, r.Concurrency)
				}
			}
		})
	}
}

func TestDurationBound(t *testing.T) {
	e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
		sc := fakeoai.Echo(r)
		sc.Gap = 5 * time.Millisecond
		return sc
	})
	gen, _ := workload.NewGenerator(smallSpec(workload.Control))
	p := plan(Concurrent, workload.Control)
	p.Requests, p.Duration = 0, 2*time.Second // 0.2 s of wall at time scale 10
	recs, err := Run(context.Background(), p, gen, e.env)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no requests")
	}
	// The budget is checked before a request is built and its target
	// picked, so a request may leave a moment after the end; allow a
	// generous margin for a loaded machine.
	for _, r := range recs {
		if r.StartWallS > 2.2 {
			t.Errorf("request sent %.3fs after the start of a 0.2 s run", r.StartWallS)
		}
	}
}

// TestMultiTurnHistory checks each turn carries the previous turns and the
// answers the server actually gave.
func TestMultiTurnHistory(t *testing.T) {
	var mu sync.Mutex
	turnOf := map[string]int{} // system prompt → turns seen
	e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
		mu.Lock()
		k := turnOf[r.Messages[0].Content]
		turnOf[r.Messages[0].Content] = k + 1
		mu.Unlock()
		sc := fakeoai.Script{Chunks: []string{fmt.Sprintf("answer-%d", k), " done"}, PromptTokens: 10}
		if len(r.Messages) != 2+2*k {
			sc.Chunks = []string{fmt.Sprintf("wrong history: %d messages at turn %d", len(r.Messages), k)}
		}
		for j := range k {
			if got := r.Messages[2+2*j].Content; got != fmt.Sprintf("answer-%d done", j) {
				sc.Chunks = []string{fmt.Sprintf("wrong answer %d: %q", j, got)}
			}
		}
		return sc
	})
	gen, _ := workload.NewGenerator(smallSpec(workload.MultiTurn))
	p := plan(Concurrent, workload.MultiTurn)
	p.Requests = 12
	recs, err := Run(context.Background(), p, gen, e.env)
	if err != nil {
		t.Fatal(err)
	}
	turns := map[int]int{}
	for _, r := range recs {
		turns[r.Turn]++
		if r.Chunks != 2 {
			t.Errorf("session %d turn %d: the server reported a history problem", r.Session, r.Turn)
		}
	}
	// Clients that finish a conversation start the next one while others
	// are mid-way, so the budget cuts some conversations short; a later
	// turn can never be more common than an earlier one.
	if turns[2] == 0 || turns[0] < turns[1] || turns[1] < turns[2] || len(turns) != 3 {
		t.Errorf("turns %v: want conversations of up to 3 turns, some complete", turns)
	}
}

func TestFailedTurnEndsConversation(t *testing.T) {
	e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
		if len(r.Messages) > 2 {
			return fakeoai.Script{Status: 500}
		}
		return fakeoai.Echo(r)
	})
	gen, _ := workload.NewGenerator(smallSpec(workload.MultiTurn))
	p := plan(Concurrent, workload.MultiTurn)
	p.Concurrency, p.Requests = 1, 6
	recs, _ := Run(context.Background(), p, gen, e.env)
	for _, r := range recs {
		if r.Turn > 1 {
			t.Fatalf("turn %d sent after turn 1 failed", r.Turn)
		}
		if r.Turn == 1 && (r.OK() || !strings.Contains(r.Error, "status 500")) {
			t.Errorf("turn 1: %q", r.Error)
		}
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
		sc := fakeoai.Echo(r)
		sc.Gap = 20 * time.Millisecond
		return sc
	})
	gen, _ := workload.NewGenerator(smallSpec(workload.Control))
	ctx, cancel := context.WithCancel(context.Background())
	p := plan(Concurrent, workload.Control)
	p.Requests = 1_000_000
	e.env.OnDone = func(*results.Record) { cancel() }
	_, err := Run(ctx, p, gen, e.env)
	if err != context.Canceled {
		t.Errorf("err %v, want context.Canceled", err)
	}
}

func TestValidate(t *testing.T) {
	base := plan(Concurrent, workload.Control)
	for _, tc := range []struct {
		name string
		mut  func(*Plan)
	}{
		{"no bound", func(p *Plan) { p.Requests, p.Duration = 0, 0 }},
		{"no clients", func(p *Plan) { p.Concurrency = 0 }},
		{"poisson without rate", func(p *Plan) { p.Mode, p.Rate = Poisson, 0 }},
		{"constant without rate", func(p *Plan) { p.Mode, p.Rate = Constant, 0 }},
		{"bad mode", func(p *Plan) { p.Mode = "burst" }},
		{"bad scale", func(p *Plan) { p.TimeScale = 0 }},
	} {
		p := base
		tc.mut(&p)
		if p.Validate() == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if err := base.Validate(); err != nil {
		t.Error(err)
	}
}

// tenantsOf returns two tenants on e's transport: a with key-a, b with
// key-b, each with its own seed.
func tenantsOf(t *testing.T, e *env, kind workload.Kind, ca, cb int) []Tenant {
	t.Helper()
	var out []Tenant
	for i, tc := range []struct {
		name string
		c    int
	}{{"a", ca}, {"b", cb}} {
		spec := smallSpec(kind)
		spec.Seed = uint64(100 + i)
		gen, err := workload.NewGenerator(spec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Tenant{Name: tc.name, Gen: gen, Concurrency: tc.c, Rate: 100 * float64(tc.c), Seed: spec.Seed,
			Client: &stream.Client{HTTP: e.env.Client.HTTP, APIKey: "key-" + tc.name}})
	}
	return out
}

// TestRunTenants: tenants run side by side within one budget, each
// request carries its tenant's key, and records name their tenant.
func TestRunTenants(t *testing.T) {
	for _, mode := range []Mode{Concurrent, Poisson} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, 1, results.Direct, fakeoai.Echo)
			p := plan(mode, workload.MultiTurn)
			p.Requests = 30
			recs, err := RunTenants(context.Background(), p, tenantsOf(t, e, workload.MultiTurn, 1, 3), e.env)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 30 {
				t.Fatalf("%d records, want the shared budget of 30", len(recs))
			}
			byTenant := map[string]int{}
			for _, r := range recs {
				byTenant[r.Tenant]++
				if !r.OK() || r.Workload != string(workload.MultiTurn) {
					t.Errorf("record %+v", r)
				}
			}
			byKey := map[string]int{}
			for _, r := range e.srvs[0].Seen() {
				byKey[r.Key]++
			}
			if len(byTenant) != 2 || byKey["key-a"] != byTenant["a"] || byKey["key-b"] != byTenant["b"] || len(byKey) != 2 {
				t.Errorf("records by tenant %v, requests by key %v: want each tenant's requests under its key", byTenant, byKey)
			}
		})
	}
}

// TestRetryAfter: by default a 429 is recorded and the client moves on;
// with RetryAfter it waits the Retry-After out, sends again, and times the
// request from its first attempt.
func TestRetryAfter(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprint("retry=", retry), func(t *testing.T) {
			e := newEnv(t, 1, results.Direct, fakeoai.Echo)
			e.srvs[0].Refuse("key-a", fakeoai.Refusal{RetryAfter: "1", Reasons: []string{"over_share"}, Times: 1})
			p := plan(Concurrent, workload.Control)
			p.Requests, p.TimeScale = 4, 1
			p.RetryAfter, p.MaxRetryAfter = retry, 5*time.Second
			recs, err := RunTenants(context.Background(), p, tenantsOf(t, e, workload.Control, 1, 1)[:1], e.env)
			if err != nil {
				t.Fatal(err)
			}
			s := results.Summarize(recs, 1, 60)
			if len(recs) != 4 {
				t.Fatalf("%d records, want 4", len(recs))
			}
			if !retry {
				if s.Refused429 != 1 || s.Refused429Reasons["over_share"] != 1 || s.Succeeded != 3 || s.Retried429 != 0 {
					t.Errorf("429 %d (%v), ok %d, retried %d; want the one 429 counted and 3 ok", s.Refused429, s.Refused429Reasons, s.Succeeded, s.Retried429)
				}
				return
			}
			if s.Refused429 != 0 || s.Succeeded != 4 || s.Retried429 != 1 {
				t.Fatalf("429 %d, ok %d, retried %d; want the 429 waited out", s.Refused429, s.Succeeded, s.Retried429)
			}
			waited := 0
			for _, r := range recs {
				if r.Retries == 1 {
					waited++
					if r.WallTTFTS < 1 {
						t.Errorf("retried request's TTFT %v s: want it timed from the first attempt, 1 s of Retry-After before", r.WallTTFTS)
					}
				}
			}
			if waited != 1 {
				t.Errorf("%d records with a retry, want 1", waited)
			}
		})
	}
}

// TestRetryAfterBound: a Retry-After longer than the bound, or than the
// run has left, is not waited out.
func TestRetryAfterBound(t *testing.T) {
	for _, tc := range []struct {
		name     string
		max, dur time.Duration
	}{
		{"over the bound", 5 * time.Second, 0},
		{"past the run's end", 2 * time.Minute, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1, results.Direct, fakeoai.Echo)
			e.srvs[0].Refuse("key-a", fakeoai.Refusal{RetryAfter: "60"})
			p := plan(Concurrent, workload.Control)
			p.Requests, p.Duration, p.TimeScale = 3, tc.dur, 1
			p.RetryAfter, p.MaxRetryAfter = true, tc.max
			start := time.Now()
			recs, err := RunTenants(context.Background(), p, tenantsOf(t, e, workload.Control, 1, 1)[:1], e.env)
			if err != nil {
				t.Fatal(err)
			}
			s := results.Summarize(recs, 1, 60)
			if s.Refused429 != 3 || s.Retried429 != 0 || time.Since(start) > 5*time.Second {
				t.Errorf("429 %d, retried %d after %v; want 3 refusals at once", s.Refused429, s.Retried429, time.Since(start))
			}
		})
	}
}

// TestTenantOwnTargets: a tenant with targets and a picker of its own
// sends there, the other tenants where the run's env says; a tenant with
// one and not the other is refused.
func TestTenantOwnTargets(t *testing.T) {
	e := newEnv(t, 1, results.Direct, fakeoai.Echo)
	side := newEnv(t, 1, results.Direct, fakeoai.Echo)
	p := plan(Concurrent, workload.Control)
	p.Requests = 20
	ts := tenantsOf(t, e, workload.Control, 2, 2)
	ts[1].Targets, ts[1].Picker = side.env.Targets, side.env.Picker
	recs, err := RunTenants(context.Background(), p, ts, e.env)
	if err != nil {
		t.Fatal(err)
	}
	byTenant := map[string]int{}
	for _, r := range recs {
		byTenant[r.Tenant]++
	}
	if got := len(e.srvs[0].Seen()); got != byTenant["a"] || got == 0 {
		t.Errorf("the run's target saw %d requests, tenant a sent %d", got, byTenant["a"])
	}
	if got := len(side.srvs[0].Seen()); got != byTenant["b"] || got == 0 {
		t.Errorf("tenant b's own target saw %d requests, it sent %d", got, byTenant["b"])
	}
	ts[1].Picker = nil
	if _, err := RunTenants(context.Background(), p, ts, e.env); err == nil || !strings.Contains(err.Error(), "tenant b") {
		t.Errorf("targets without a picker: %v", err)
	}
}
