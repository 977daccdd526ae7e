package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// The gateway tells the router when the engine steps of the workers it
// streams from end: a request routed while a worker streams tokens one
// step apart carries that worker's clock, and one routed before any
// stream carries none.
func TestRouteCarriesStepClocks(t *testing.T) {
	const step = 40 * time.Millisecond
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fl := w.(http.Flusher)
		events := streamEvents(testModel, true, false)
		// Two steps' tokens, a step apart, then the rest once released.
		for i, ev := range events {
			_, _ = io.WriteString(w, ev)
			fl.Flush()
			switch i {
			case 0:
				time.Sleep(step)
			case 1:
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
		}
	}))
	t.Cleanup(upstream.Close)

	e := newEnv(t, envOpts{noNATS: true})
	e.router.setTargets(testModel, &routerv1.Target{Id: "w0", Url: upstream.URL, Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, ServedModel: testModel, Type: "vLLM"})
	body := `{"model":"` + testModel + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := e.client.Post(e.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	t.Cleanup(func() { <-done })
	defer close(release)
	// Both steps' tokens are in once the second data event was read; the
	// gateway reads them before the handler waits on release.
	time.Sleep(step + 50*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/v1/chat/completions", strings.NewReader(`{"model":"`+testModel+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	// The second request is answered by the same held upstream; only its
	// Route call matters, so it is cut short.
	go func() {
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}()
	e.eventually(t, "the second route call", func() bool { return len(e.router.calls()) == 2 })
	cancel()
	calls := e.router.calls()
	if cs := calls[0].GetStepClocks(); len(cs) != 0 {
		t.Fatalf("the first request, before any stream, carried clocks: %v", cs)
	}
	cs := calls[1].GetStepClocks()
	if len(cs) != 1 || cs[0].GetEndpointId() != "w0" {
		t.Fatalf("the second request's clocks = %v, want one for w0", cs)
	}
	// Loose bounds: how late the gateway's reads return on a loaded
	// machine moves both (package stepclock tests the arithmetic).
	c := cs[0]
	if s := c.GetStepSeconds(); s < step.Seconds()/2 || s > step.Seconds()*5 {
		t.Errorf("step = %v s, want about %v", s, step.Seconds())
	}
	if since := c.GetSinceStepSeconds(); since <= 0 || since > time.Since(sent).Seconds()+step.Seconds()+0.05 {
		t.Errorf("since = %v s, want after the second step's tokens and before the request was sent", since)
	}
}
