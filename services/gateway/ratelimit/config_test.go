package ratelimit

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseLimitsFile(t *testing.T) {
	got, err := ParseLimitsFile([]byte(`
tenants:
  team-a:
    requestsPerMinute: 60
    tokensPerDay: 1000000
    models:
      llama-3-8b: {outputTokensPerMinute: 5000}
  default: {}
  ml.research_2: {requestsPerMinute: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if a := got["team-a"]; a.RequestsPerMinute != 60 || a.TokensPerDay != 1_000_000 || a.Models["llama-3-8b"].OutputTokensPerMinute != 5000 {
		t.Errorf("team-a = %+v", a)
	}
	if _, ok := got["default"]; !ok {
		t.Error("default missing")
	}
	for doc, want := range map[string]string{
		"tenants:\n  a:\n    requestsPerMinut: 1\n":                                    `unknown field "requestsPerMinut"`,
		"tenants:\n  a:\n    requestsPerMinute: -5\n":                                  "tenants.a.requestsPerMinute: -5: want 0 (no limit) to",
		"tenants:\n  a:\n    requestsPerMinute: 1.5\n":                                 "limits file",
		"tenants:\n  a:\n    requestsPerMinute: 99999999999999999999999\n":             "limits file",
		"tenants:\n  a:\n    models:\n      m: {tokensPerDay: 5, tokensPerMonth: 1}\n": "tenants.a.models.m.tokensPerMonth: 1 is less than tokensPerDay (5)",
		"tenants:\n  Team_A: {}\n":                                                     `tenant name "Team_A"`,
		"tenants:\n  a:\n    models:\n      \"{x}\": {}\n":                             `model name "{x}"`,
		"tenants: [1]\n": "limits file",
		"- 1\n":          "limits file",
	} {
		_, err := ParseLimitsFile([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", doc, err, want)
		}
	}
	// Every error at once, in order.
	_, err = ParseLimitsFile([]byte("tenants:\n  b: {requestsPerMinute: -1}\n  a: {tokensPerDay: -1}\n"))
	if err == nil || strings.Index(err.Error(), "tenants.a.") > strings.Index(err.Error(), "tenants.b.") || !strings.Contains(err.Error(), "tenants.a.") {
		t.Errorf("both errors, sorted: %v", err)
	}
}

// Hostile sizes fail with a bound, not an allocation.
func TestParseLimitsFileHostile(t *testing.T) {
	if _, err := ParseLimitsFile(make([]byte, MaxLimitsFileBytes+1)); err == nil || !strings.Contains(err.Error(), "at most 1048576") {
		t.Errorf("oversized: %v", err)
	}
	var b strings.Builder
	b.WriteString("tenants:\n  a:\n    models:\n")
	for i := range MaxModelsPerTenant + 1 {
		fmt.Fprintf(&b, "      m%d: {}\n", i)
	}
	if _, err := ParseLimitsFile([]byte(b.String())); err == nil || !strings.Contains(err.Error(), "tenants.a.models: 257, at most 256") {
		t.Errorf("too many models: %v", err)
	}
	// A billion-laughs document: aliases expanding far past the input.
	bomb := "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ntenants: *h\n"
	if _, err := ParseLimitsFile([]byte(bomb)); err == nil {
		t.Error("alias bomb accepted")
	}
}

func FuzzParseLimitsFile(f *testing.F) {
	f.Add([]byte("tenants:\n  a:\n    requestsPerMinute: 60\n    models:\n      m: {tokensPerDay: 10}\n"))
	f.Add([]byte(`{"tenants":{"b":{"inputTokensPerMinute":1,"outputTokensPerMinute":1,"tokensPerDay":2}}}`))
	f.Add([]byte("tenants: {a: {tokensPerMonth: -1}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseLimitsFile(data)
		if err != nil {
			return
		}
		// What parses is valid, tenant by tenant.
		for n, tl := range got {
			if err := tl.Validate("tenants." + n); err != nil {
				t.Fatalf("accepted invalid %s: %v", n, err)
			}
			for m, ml := range tl.Models {
				if err := ml.Validate(m); err != nil {
					t.Fatalf("accepted invalid %s/%s: %v", n, m, err)
				}
			}
		}
	})
}
