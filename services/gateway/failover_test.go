package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// refusing is an upstream that answers status with Retry-After (when
// set) and an OpenAI error body.
func refusing(t *testing.T, id string, status int, retryAfter string) *routerv1.Target {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"message":"`+id+` refuses","type":"rate_limit_error","code":null}}`)
	}))
	t.Cleanup(srv.Close)
	return &routerv1.Target{Id: id, Url: srv.URL, Kind: routerv1.TargetKind_TARGET_KIND_LOCAL, ServedModel: testModel, Type: "vLLM"}
}

// TestFailoverChain: the first target answers 429 with Retry-After, the
// second 503, the third serves: the client gets the third's answer, each
// retry excluding what failed. Until its Retry-After passes, the 429's
// target is excluded from the next requests' first Route call too; the
// 503 without one is not.
func TestFailoverChain(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	good := newVLLM(t, modeOK)
	e.router.setTargets(testModel,
		refusing(t, "quota", http.StatusTooManyRequests, "30"),
		refusing(t, "busy", http.StatusServiceUnavailable, ""),
		good.target("good"))
	resp := e.post(t, "/v1/chat/completions", chatBody, nil)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, out)
	}
	calls := e.router.calls()
	var excl [][]string
	for _, c := range calls {
		excl = append(excl, c.GetExcludeEndpoints())
	}
	if len(calls) != 3 || len(excl[0]) != 0 || !slices.Equal(excl[1], []string{"quota"}) || !slices.Equal(excl[2], []string{"quota", "busy"}) {
		t.Fatalf("Route exclusions %v, want [] [quota] [quota busy]", excl)
	}

	resp = e.post(t, "/v1/chat/completions", chatBody, nil)
	resp.Body.Close()
	next := e.router.calls()[3]
	if !slices.Equal(next.GetExcludeEndpoints(), []string{"quota"}) {
		t.Errorf("the next request's first Route excludes %v, want [quota] (its Retry-After: 30 has not passed)", next.GetExcludeEndpoints())
	}
}

// TestFailoverExhausted: every target refuses with 429: after
// --max-attempts the client gets the last refusal, its Retry-After kept,
// so it knows when to come back.
func TestFailoverExhausted(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	e.router.setTargets(testModel,
		refusing(t, "a", http.StatusTooManyRequests, "7"),
		refusing(t, "b", http.StatusTooManyRequests, "7"),
		refusing(t, "c", http.StatusTooManyRequests, "7"),
		refusing(t, "d", http.StatusTooManyRequests, "7"))
	resp := e.post(t, "/v1/chat/completions", chatBody, nil)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(out), "c refuses") {
		t.Errorf("got %d Retry-After %q %s, want the third target's 429 with Retry-After 7", resp.StatusCode, resp.Header.Get("Retry-After"), out)
	}
	if n := len(e.router.calls()); n != 3 {
		t.Errorf("%d Route calls, want 3 (--max-attempts)", n)
	}
}

func TestRetryAfterParse(t *testing.T) {
	now := mustTime(t, "Mon, 01 Dec 2026 23:00:00 GMT")
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"30", "30s", true}, {"0", "0s", false}, {"", "0s", false}, {"-1", "0s", false}, {"soon", "0s", false},
		{"Mon, 01 Dec 2026 23:00:10 GMT", "10s", true}, {"Mon, 01 Dec 2026 22:59:00 GMT", "0s", false},
	} {
		d, ok := retryAfter(c.in, now)
		if d.String() != c.want || ok != c.ok {
			t.Errorf("retryAfter(%q) = %s %v, want %s %v", c.in, d, ok, c.want, c.ok)
		}
	}
}

func mustTime(t *testing.T, v string) time.Time {
	t.Helper()
	tm, err := http.ParseTime(v)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}
