package router

import (
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
)

// noPolicies is a snapshot with no resources: its implicit program has no
// rules, so every decision is default routing.
func noPolicies(tb testing.TB) *policyState {
	tb.Helper()
	snap, diags := policy.Compile(nil)
	if diags.HasErrors() || snap == nil {
		tb.Fatalf("compile empty snapshot: %v", diags)
	}
	return &policyState{snap: snap, prog: snap.Program("")}
}

// TestDefaultRoutingKeepsKVPick checks that default routing under policies
// picks what the KV-aware table picks, recompute charge and near-tie
// rotation included, on a warm fleet where cache overlap decides.
func TestDefaultRoutingKeepsKVPick(t *testing.T) {
	s, body := benchService(t)
	st := noPolicies(t)
	ps := &policyScratch{}
	bodies := [][]byte{body, []byte(`{"model":"m","messages":[{"role":"user","content":"unrelated"}]}`), nil}
	for i := range 60 {
		req := &routerv1.RouteRequest{RequestId: "r" + strconv.Itoa(i), Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: bodies[i%len(bodies)]}
		now := time.Now()
		l := s.getLookup()
		s.prepare(l, req, now)
		want, out := s.table.Pick(s.tableRequest(l, req), now)
		if out != load.Routed {
			t.Fatal(out)
		}
		l2 := s.getLookup()
		s.evaluate(st, ps, l2, req, now)
		if ps.d.Outcome != policy.Routed {
			t.Fatalf("%d: policy outcome %v", i, ps.d.Outcome)
		}
		got := ps.rows[ps.d.Chosen]
		if got.EndpointID != want.EndpointID || got.Estimate.Score != want.Estimate.Score {
			t.Fatalf("%d: policy path picked %s (score %v), table %s (score %v)", i, got.EndpointID, got.Estimate.Score, want.EndpointID, want.Estimate.Score)
		}
		// Route for real so load and rotation move on.
		if _, err := s.route(req, now); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkDecidePolicy8k is Route's decision path under the dev catalog's
// kind of program (default routing over 16 endpoints here), from body to
// response, prompt reading included: compare with BenchmarkDecide8k plus
// BenchmarkReadPrompt8k.
func BenchmarkDecidePolicy8k(b *testing.B) {
	s, body := benchService(b)
	s.pol.Store(noPolicies(b))
	req := &routerv1.RouteRequest{Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		req.RequestId = "r" + strconv.Itoa(i%4096)
		resp, err := s.route(req, start)
		if err != nil || resp.GetTarget() == nil {
			b.Fatal(err, resp)
		}
		lat = append(lat, time.Since(start))
		s.table.Complete(load.Completion{RequestID: req.RequestId, EndpointID: resp.GetTarget().GetId(), At: start})
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

func FuzzReplaceModel(f *testing.F) {
	f.Add([]byte(`{"model":"a","messages":[]}`), "b")
	f.Add([]byte(` { "x": {"model": 1}, "model" : "a" } `), "q\"uote")
	f.Add([]byte(`{"model":"a","model":"c"}`), "b")
	f.Add([]byte(`[]`), "b")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		out, err := replaceModel(body, model)
		if err != nil {
			return
		}
		start, end, err := modelSpan(out)
		if err != nil {
			t.Fatalf("rewritten body %q unreadable: %v", out, err)
		}
		var got string
		if err := jsonUnmarshalString(out[start:end], &got); err != nil {
			t.Fatalf("model value %q: %v", out[start:end], err)
		}
		if got != model && !(containsInvalidUTF8(model)) {
			t.Fatalf("model %q, want %q", got, model)
		}
	})
}
