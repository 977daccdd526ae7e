package apikey

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	keys "github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/gateway/admission"
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

// program is a GatewayBackend with n tenants of one key each.
func program(tb testing.TB, n int) (*policy.Program, []string) {
	tb.Helper()
	var keyList []string
	gb := &v1alpha1.GatewayBackend{Spec: v1alpha1.GatewayBackendSpec{Auth: &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey}}}
	for i := range n {
		k := keys.Generate()
		keyList = append(keyList, k)
		gb.Spec.Tenants = append(gb.Spec.Tenants, v1alpha1.Tenant{Name: fmt.Sprintf("team-%d", i), KeyDigests: []string{keys.Digest(k)}})
	}
	o, err := policy.ObjectOf(gb)
	if err != nil {
		tb.Fatal(err)
	}
	o.Namespace, o.Name = "inference", "front"
	snap, diags := policy.Compile([]*policy.Object{o})
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	return snap.Program("front"), keyList
}

func TestAdmit(t *testing.T) {
	p, keyList := program(t, 3)
	reg := prometheus.NewRegistry()
	step, err := New(admission.Deps{Program: func() *policy.Program { return p }, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	r := &admission.Request{HTTP: httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)}
	r.HTTP.Header.Set("Authorization", "Bearer "+keyList[1])
	if err := step.Admit(context.Background(), r); err != nil || r.Tenant != "team-1" {
		t.Fatalf("Admit: %v, tenant %q", err, r.Tenant)
	}
	// Before the first policy snapshot the auth mode is unknown: closed.
	none, _ := New(admission.Deps{Program: func() *policy.Program { return nil }})
	var ref *admission.Refusal
	if err := none.Admit(context.Background(), &admission.Request{HTTP: r.HTTP}); !errors.As(err, &ref) || ref.Status != http.StatusServiceUnavailable {
		t.Errorf("without a snapshot: %v, want 503", err)
	}
}

// BenchmarkAdmit is the step's cost per request with 10,000 keys: parse,
// SHA-256, map lookup, constant-time compare.
func BenchmarkAdmit(b *testing.B) {
	p, keyList := program(b, 10000)
	step, _ := New(admission.Deps{Program: func() *policy.Program { return p }})
	hr := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	hr.Header.Set("Authorization", "Bearer "+keyList[5000])
	for b.Loop() {
		r := admission.Request{HTTP: hr}
		if err := step.Admit(context.Background(), &r); err != nil {
			b.Fatal(err)
		}
	}
}
