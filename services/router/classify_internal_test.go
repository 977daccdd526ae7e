package router

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
)

// examplePolicies is deploy/examples' GatewayBackend "dev" with its
// policies and providers, compiled: pii-stays-local reads pii-detected,
// smart-semantic-routing complexity-low, and the backend declares its own
// kinds of personal data (spec.pii).
func examplePolicies(tb testing.TB) *policyState {
	tb.Helper()
	src := filepath.Join("..", "..", "deploy", "examples")
	files, err := filepath.Glob(filepath.Join(src, "policies", "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("example policies: %v (%d)", err, len(files))
	}
	files = append(files, filepath.Join(src, "gateway-backend.yaml"), filepath.Join(src, "providers.yaml"))
	var objs []*policy.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		o, diags := policy.ParseYAML(f, data)
		if diags.HasErrors() {
			tb.Fatal(diags.Error())
		}
		objs = append(objs, o...)
	}
	snap, diags := policy.Compile(objs)
	if diags.HasErrors() || snap == nil {
		tb.Fatalf("compile: %v", diags.Error())
	}
	prog := snap.Program("dev")
	if prog == nil {
		tb.Fatal("no GatewayBackend dev")
	}
	return &policyState{snap: snap, prog: prog}
}

// classifierSets are the sets BenchmarkClassify8k compares: the tags the
// client and the tenant carry alone, the built-ins, and the built-ins
// with the example GatewayBackend's own kinds (spec.pii).
var classifierSets = []struct{ Name, Classifiers string }{
	{"tags-only", "header-tags,tenant-tags"},
	{"builtins", "header-tags,tenant-tags,pii,complexity,external"},
	{"builtins+pii-rules", "header-tags,tenant-tags,pii,pii-rules,complexity,external"},
}

// BenchmarkClassify8k is what classification adds to Route, measured
// where it happens: the classify step of a decision (between reading
// the prompt and scoring; nothing else runs a classifier's work) for an
// 8k-token chat under deploy/examples' policies, whose guards read the
// content classifiers' tags, so they read the prompt on every request.
//
// The sets run turn about, call by call on one locked thread, so what
// else the machine runs falls on each alike: per set the step's wall
// time p50/p99 (µs) and its CPU time per call (the thread's own, µs).
// BenchmarkRoute8kClassifiers is the same end to end, over gRPC.
func BenchmarkClassify8k(b *testing.B) {
	s, body := benchService(b)
	s.pol.Store(examplePolicies(b))
	sets := make([][]classifier, len(classifierSets))
	for i, c := range classifierSets {
		cls, err := newClassifiers(c.Classifiers)
		if err != nil {
			b.Fatal(err)
		}
		sets[i] = cls
	}
	req := &routerv1.RouteRequest{RequestId: "cls", Tenant: "team-a", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
	ctx := context.Background()
	d := s.getDecision()
	d.req, d.st = req, s.pol.Load()
	if err := s.readPrompt(ctx, &d.lookup, req); err != nil || d.prompt.Chat == nil {
		b.Fatalf("read prompt: %v (parsed %v)", err, d.prompt.Chat != nil)
	}
	b.ReportMetric(float64(d.tokens), "prompt-tokens")

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	lat := make([][]time.Duration, len(sets))
	cpu := make([]time.Duration, len(sets))
	tags := make([][]string, len(sets))
	for i := 0; b.Loop(); i++ {
		for k := range sets {
			j := (i + k) % len(sets) // each set first in turn
			s.classifiers = sets[j]
			c0, start := classifytest.ThreadCPU(), time.Now()
			if err := s.classify(ctx, d); err != nil {
				b.Fatal(err)
			}
			lat[j] = append(lat[j], time.Since(start))
			cpu[j] += classifytest.ThreadCPU() - c0
			if i == 0 {
				tags[j] = slices.Clone(d.tags)
			}
		}
	}
	b.StopTimer()
	// The content classifiers read the prompt: it is long prose, so
	// complexity says so.
	if !slices.Contains(tags[1], "complexity-high") || slices.Contains(tags[0], "complexity-high") {
		b.Fatalf("tags per set %q: the built-ins did not read the prompt", tags)
	}
	for j, c := range classifierSets {
		b.ReportMetric(float64(cpu[j].Nanoseconds())/1e3/float64(len(lat[j])), c.Name+"-cpu-µs")
		testkit.ReportPercentiles(b, c.Name+"-", lat[j])
	}
}
