package main

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/flaghelp"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the commands' output")

// golden compares got with testdata/golden/NAME.txt; -update rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// replayNow is a moment after the recorded answers' last scrapes.
var replayNow = time.Date(2026, 12, 1, 9, 57, 28, 500_000_000, time.UTC)

// request is what the router's REST API received.
type request struct {
	method, path, query, body string
}

// replayRouter answers every request with testdata/router/ANSWER, an
// answer of a real router's REST API (services/router, recorded with
// fake vLLM workers, one of them holding the prompt's prefix, and with
// policyd's dev catalog), and keeps the request for the test.
func replayRouter(t *testing.T, status int, answer string) (*httptest.Server, *request) {
	t.Helper()
	return replay(t, "router", status, answer)
}

// replay answers every request with testdata/DIR/ANSWER and keeps the
// request.
func replay(t *testing.T, dir string, status int, answer string) (*httptest.Server, *request) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", dir, answer))
	if err != nil {
		t.Fatal(err)
	}
	got := &request{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		*got = request{r.Method, r.URL.Path, r.URL.RawQuery, string(body)}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// TestOnlineGolden runs endpoints and explain against recorded router
// answers: the tables people read, the JSON machines read, and the
// request each command sends.
func TestOnlineGolden(t *testing.T) {
	clock = func() time.Time { return replayNow }
	t.Cleanup(func() { clock = time.Now })
	chat, err := os.ReadFile(filepath.Join("testdata", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	explainPath := "/v1/route:explain"
	tests := []struct {
		name   string
		args   []string
		stdin  string
		answer string
		want   request
	}{
		{name: "endpoints", args: []string{"endpoints"}, answer: "endpoints.json",
			want: request{method: "GET", path: "/v1/endpoints"}},
		{name: "endpoints-json", args: []string{"endpoints", "--model", "m", "-o", "json"}, answer: "endpoints.json",
			want: request{method: "GET", path: "/v1/endpoints", query: "model=m"}},
		{name: "explain-chat", args: []string{"explain", "--request", "testdata/request.json", "--tenant", "team-a", "--tags", "x,y"}, answer: "explain-chat.json",
			want: request{method: "POST", path: explainPath, query: "tags=x%2Cy&tenant=team-a", body: string(chat)}},
		{name: "explain-chat-json", args: []string{"explain", "--request", "-", "-o", "json"}, stdin: string(chat), answer: "explain-chat.json",
			want: request{method: "POST", path: explainPath, body: string(chat)}},
		{name: "explain-unknown-model", args: []string{"explain", "--model", "nope"}, answer: "explain-unknown-model.json",
			want: request{method: "POST", path: explainPath, body: `{"api":"API_KIND_CHAT_COMPLETIONS","model":"nope"}`}},
		{name: "explain-policy-burst", args: []string{"explain", "--request", "-", "--model", "qwen-3.6-27b", "--tenant", "team-a"}, answer: "explain-policy-burst.json",
			stdin: `{"model": "standard-model", "messages": [{"role": "user", "content": "Summarise the attached contract."}]}`,
			want: request{method: "POST", path: explainPath, query: "tenant=team-a",
				body: `{"messages":[{"role":"user","content":"Summarise the attached contract."}],"model":"qwen-3.6-27b"}`}},
		{name: "explain-policy-pii", args: []string{"explain", "--request", "testdata/request.json", "--tenant", "team-a", "--tags", "pii-detected"}, answer: "explain-policy-pii.json",
			want: request{method: "POST", path: explainPath, query: "tags=pii-detected&tenant=team-a", body: string(chat)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := replayRouter(t, http.StatusOK, tc.answer)
			code, out, errOut := runCLI(t, tc.stdin, append(tc.args, "--router", srv.URL)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if *got != tc.want {
				t.Errorf("the router got %+v\nwant             %+v", *got, tc.want)
			}
			golden(t, tc.name, out)
		})
	}
}

func TestOnlineErrors(t *testing.T) {
	srv, _ := replayRouter(t, http.StatusBadRequest, "explain-bad-role.json")
	// Nothing listens on port 1: the cases other than the first fail
	// before asking a router.
	const nowhere = "http://127.0.0.1:1"
	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		want        string
	}{
		{"the router's message", "", []string{"explain", "--router", srv.URL, "--request", "testdata/request.json"}, 1,
			"400 Bad Request: messages[0].role: unsupported role \"bot\": want system, developer, user, assistant or tool\n"},
		{"unknown output", "", []string{"endpoints", "--router", nowhere, "-o", "yaml"}, 2, `invalid value "yaml" for flag -o: want table or json`},
		{"no model, no request", "", []string{"explain", "--router", nowhere}, 1, "--model is required without --request"},
		{"request not JSON", "", []string{"explain", "--router", nowhere, "--request", "testdata/state-saturated.yaml"}, 1, "request testdata/state-saturated.yaml: not a JSON object"},
		{"request not a request body", `{"model":"m"}`, []string{"explain", "--router", nowhere, "--request", "-"}, 1, `neither "messages" (chat completions) nor "prompt" (completions)`},
		{"request without model", `{"prompt":"hi"}`, []string{"explain", "--router", nowhere, "--request", "-"}, 1, "the body names no model: give --model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stdout %q, stderr lacks %q:\n%s", code, tc.code, out, tc.want, errOut)
			}
		})
	}
}

// TestExplainHelp: one help for both modes, every flag in it once, and no
// default said twice.
func TestExplainHelp(t *testing.T) {
	for _, args := range [][]string{{"explain", "-h"}, {"explain", "-f", examples, "-h"}} {
		code, out, help := runCLI(t, "", args...)
		if code != 0 || out != "" {
			t.Fatalf("%v: exit %d, stdout %q", args, code, out)
		}
		fs, _ := newExplainFlags(io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			if n := strings.Count(help, "\n  -"+f.Name+" "); n != 1 {
				t.Errorf("%v: -%s listed %d times", args, f.Name, n)
			}
		})
		for _, bad := range flaghelp.RepeatedDefaults(fs) {
			t.Errorf("says its default twice: %s", bad)
		}
		golden(t, "explain-help", help)
	}
}
