package apikey

import (
	"net/http"
	"strings"
	"testing"

	keys "github.com/switchyard-dev/switchyard/internal/apikey"
)

func TestParse(t *testing.T) {
	key := keys.Generate()
	other := keys.Generate()
	for _, tt := range []struct {
		name     string
		hdr      http.Header
		key, why string
	}{
		{"bearer", http.Header{"Authorization": {"Bearer " + key}}, key, ""},
		{"bearer, any case, extra spaces", http.Header{"Authorization": {"  bearer   " + key + " "}}, key, ""},
		{"x-api-key", http.Header{"X-Api-Key": {key}}, key, ""},
		{"both, same key", http.Header{"Authorization": {"Bearer " + key}, "X-Api-Key": {key}}, key, ""},
		{"nothing", http.Header{}, "", ReasonMissing},
		{"both, different keys", http.Header{"Authorization": {"Bearer " + key}, "X-Api-Key": {other}}, "", ReasonConflicting},
		{"Authorization twice", http.Header{"Authorization": {"Bearer " + key, "Bearer " + key}}, "", ReasonConflicting},
		{"basic", http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, "", ReasonMalformed},
		{"bearer without token", http.Header{"Authorization": {"Bearer"}}, "", ReasonMalformed},
		{"empty x-api-key", http.Header{"X-Api-Key": {" "}}, "", ReasonMalformed},
		{"another vendor's key", http.Header{"Authorization": {"Bearer sk-" + strings.Repeat("a", 48)}}, "", ReasonMalformed},
		{"short", http.Header{"X-Api-Key": {"sy-abc"}}, "", ReasonMalformed},
		{"bad characters", http.Header{"X-Api-Key": {key[:20] + "+/=" + key[23:]}}, "", ReasonMalformed},
		{"64 KiB", http.Header{"Authorization": {"Bearer sy-" + strings.Repeat("a", 64<<10)}}, "", ReasonMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, why := Parse(tt.hdr)
			if k != tt.key || why != tt.why {
				t.Errorf("Parse = %q %q, want %q %q", k, why, tt.key, tt.why)
			}
		})
	}
}

// FuzzParse: any header values give a key of the right shape or a
// reason, never both, never a panic; a key is one the client sent.
func FuzzParse(f *testing.F) {
	f.Add("Bearer "+keys.Generate(), "")
	f.Add("", keys.Generate())
	f.Add("bearer  sy-", "sy-\x00")
	f.Add("Bearer "+strings.Repeat("sy-", 100), "x")
	f.Fuzz(func(t *testing.T, auth, xkey string) {
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		if xkey != "" {
			h.Set("X-Api-Key", xkey)
		}
		k, why := Parse(h)
		switch {
		case (k == "") == (why == ""):
			t.Fatalf("Parse = %q %q: want exactly one", k, why)
		case k != "" && (!keys.WellFormed(k) || !strings.Contains(auth+xkey, k)):
			t.Fatalf("Parse = %q from %q %q", k, auth, xkey)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	h := http.Header{"Authorization": {"Bearer " + keys.Generate()}}
	for b.Loop() {
		if _, why := Parse(h); why != "" {
			b.Fatal(why)
		}
	}
}
