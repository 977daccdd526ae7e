package meter

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad queries get a 400 naming every fault.
func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		query string
		want  string // "" for valid
	}{
		{"tenant=a", ""},
		{"tenant=a&since=30d&by=day", ""},
		{"tenant=a&from=2026-12-01T00:00:00Z&to=2026-12-01T06:00:00Z&by=hour", ""},
		{"", "tenant: required"},
		{"tenant=a&by=week", `by "week": want model, minute, hour or day`},
		{"tenant=a&since=1w", `since "1w": want a duration`},
		{"tenant=a&since=-5h", `since "-5h"`},
		{"tenant=a&since=0x1d", `since "0x1d"`},
		{"tenant=a&since=1h&from=2026-12-01T00:00:00Z", "since or from, not both"},
		{"tenant=a&from=yesterday", `from "yesterday": want RFC 3339`},
		{"tenant=a&from=2026-12-02T00:00:00Z", "the range is empty"},
		{"tenant=a&since=500d", "longer than 400 days"},
		{"tenant=a&since=60d&by=minute", "more than 50000 rows"},
		{"tenant=" + strings.Repeat("x", 300), "longer than 253 bytes"},
		{"by=week&since=1w", "tenant: required; by \"week\""},
	} {
		r := httptest.NewRequest(http.MethodGet, "/v1/usage?"+c.query, nil)
		_, err := parseQuery(r, now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.query, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.query, err, c.want)
		}
	}
}

// FuzzParseQuery: any query string is parsed or refused, never more.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"tenant=a&since=30d&by=day", "tenant=a&from=2026-12-01T00:00:00Z&to=2027-12-01T00:00:00Z", "since=9999999999999d", "tenant=%00&by=%ff"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/usage", nil)
		r.URL.RawQuery = raw
		q, err := parseQuery(r, now)
		if err == nil && (!q.from.Before(q.to) || q.to.Sub(q.from) > maxUsageRange || q.tenant == "") {
			t.Fatalf("%q accepted as %+v", raw, q)
		}
	})
}

// With a token file the API wants the token; without one it is refused
// on an address beyond loopback.
func TestUsageAPIAuth(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	call := func(a *operatorAuth, token string) int {
		r := httptest.NewRequest(http.MethodGet, "/v1/usage", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		a.wrap(ok).ServeHTTP(w, r)
		return w.Code
	}
	withToken, err := newOperatorAuth(file, "0.0.0.0:9096")
	if err != nil {
		t.Fatal(err)
	}
	if c := call(withToken, "s3cret-0123456789abcdef"); c != http.StatusTeapot {
		t.Errorf("the token: %d", c)
	}
	for _, tok := range []string{"", "wrong", "s3cret-0123456789abcdef "} {
		if c := call(withToken, tok); c != http.StatusUnauthorized {
			t.Errorf("token %q: %d, want 401", tok, c)
		}
	}
	open, _ := newOperatorAuth("", ":9096")
	if c := call(open, ""); c != http.StatusForbidden {
		t.Errorf("no token beyond loopback: %d, want 403", c)
	}
	local, _ := newOperatorAuth("", "127.0.0.1:9096")
	if c := call(local, ""); c != http.StatusTeapot {
		t.Errorf("no token on loopback: %d", c)
	}
	if _, err := newOperatorAuth(filepath.Join(t.TempDir(), "missing"), ":9096"); err == nil {
		t.Error("a missing token file was accepted")
	}
}
