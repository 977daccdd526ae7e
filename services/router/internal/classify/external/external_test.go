package external

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// program compiles the dev catalog's workers and providers, the PII guard
// and a GatewayBackend naming classifiers (YAML list items).
func program(t *testing.T, classifiers string) *policy.Program {
	t.Helper()
	examples := filepath.Join("..", "..", "..", "..", "..", "deploy", "examples")
	backend := filepath.Join(t.TempDir(), "backend.yaml")
	body := `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: dev, namespace: inference}
spec:
  models: [{name: qwen-3.6-27b}]
  policies: [{name: pii-stays-local, mode: Guard}]
  classifiers:
` + classifiers
	if err := os.WriteFile(backend, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s, diags, err := policy.Load(filepath.Join(examples, "workers.yaml"), filepath.Join(examples, "providers.yaml"),
		filepath.Join(examples, "policies", "pii-stays-local.yaml"), backend)
	if err != nil || s == nil {
		t.Fatalf("load: %v %s", err, diags.Error())
	}
	return s.Program("dev")
}

func request(p *policy.Program, text string) *classify.Request {
	body, _ := json.Marshal(map[string]any{"model": "qwen-3.6-27b", "messages": []map[string]string{{"role": "user", "content": text}}})
	return &classify.Request{Tenant: "team-a", Model: "qwen-3.6-27b", Program: p, API: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: body}
}

func classify1(t *testing.T, p *policy.Program, text string) []string {
	t.Helper()
	c, _ := New()
	tags, err := c.Classify(context.Background(), request(p, text), nil)
	if err != nil {
		t.Fatalf("Classify failed the decision: %v", err)
	}
	return tags
}

// TestAsksAndKeepsListedTags: the prompt's text, model and tenant are
// sent; of the answer only the entry's tags are kept.
func TestAsksAndKeepsListedTags(t *testing.T) {
	var got question
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		_, _ = w.Write([]byte(`{"tags":["pii-detected","vip","pii:name"]}`))
	}))
	defer srv.Close()
	p := program(t, `  - {name: presidio, url: "`+srv.URL+`", tags: [pii-detected, pii:name]}`+"\n")
	tags := classify1(t, p, "Bonjour, je suis Marie Curie")
	if !slices.Equal(tags, []string{"pii-detected", "pii:name"}) {
		t.Errorf("tags %v, want the listed ones only", tags)
	}
	if got.Text != "Bonjour, je suis Marie Curie" || got.Model != "qwen-3.6-27b" || got.Tenant != "team-a" {
		t.Errorf("sent %+v", got)
	}
}

// TestFailsClosed: an error status, a wrong answer, a timeout and a full
// set of slots each give the fail tag, counted by reason.
func TestFailsClosed(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees the client hang up
		switch r.URL.Path {
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/garbage":
			_, _ = w.Write([]byte(`{"labels":[]}`))
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	for _, c := range []struct{ path, reason string }{{"/500", "status"}, {"/garbage", "answer"}, {"/slow", "timeout"}} {
		name := strings.Trim(c.path, "/") + "-check"
		p := program(t, `  - {name: `+name+`, url: "`+srv.URL+c.path+`", tags: [pii:name], timeout: 50ms}`+"\n")
		before := testutil.ToFloat64(Failures.WithLabelValues(name, c.reason))
		if tags := classify1(t, p, "hello"); !slices.Equal(tags, []string{"pii-detected"}) {
			t.Errorf("%s: tags %v, want the fail tag pii-detected", c.path, tags)
		}
		if d := testutil.ToFloat64(Failures.WithLabelValues(name, c.reason)) - before; d != 1 {
			t.Errorf("%s: failures{reason=%s} rose by %v, want 1", c.path, c.reason, d)
		}
	}

	// One slot, held by a call that hangs: the next waits its timeout for
	// the slot, then fails closed as busy.
	holder := program(t, `  - {name: busy-check, url: "`+srv.URL+`/slow", tags: [pii:name], timeout: 5s, maxConcurrency: 1}`+"\n")
	p := program(t, `  - {name: busy-check, url: "`+srv.URL+`/slow", tags: [pii:name], timeout: 300ms, maxConcurrency: 1}`+"\n")
	c, _ := New()
	go func() { _, _ = c.Classify(context.Background(), request(holder, "first"), nil) }()
	time.Sleep(50 * time.Millisecond)
	before := testutil.ToFloat64(Failures.WithLabelValues("busy-check", "busy"))
	tags, _ := c.Classify(context.Background(), request(p, "second"), nil)
	if !slices.Equal(tags, []string{"pii-detected"}) || testutil.ToFloat64(Failures.WithLabelValues("busy-check", "busy"))-before != 1 {
		t.Errorf("busy: tags %v, failures{busy} +%v", tags, testutil.ToFloat64(Failures.WithLabelValues("busy-check", "busy"))-before)
	}
}

// TestNotAskedWhenNothingReads: a classifier none of whose tags a rule
// reads is not called.
func TestNotAskedWhenNothingReads(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = w.Write([]byte(`{"tags":["finance"]}`))
	}))
	defer srv.Close()
	p := program(t, `  - {name: topics, url: "`+srv.URL+`", tags: [finance], failTag: unclassified}`+"\n")
	if tags := classify1(t, p, "quarterly numbers"); len(tags) != 0 || calls.Load() != 0 {
		t.Errorf("tags %v after %d calls, want none asked", tags, calls.Load())
	}
}
