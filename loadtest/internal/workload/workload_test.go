package workload

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func sessions(t *testing.T, spec Spec, n int) []Session {
	t.Helper()
	g, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Session, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

func TestDeterministicPerSeed(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			spec := DefaultSpec(kind)
			spec.Seed = 42
			a, b := sessions(t, spec, 20), sessions(t, spec, 20)
			if !reflect.DeepEqual(a, b) {
				t.Fatal("two generators with the same seed gave different sessions")
			}
			spec.Seed = 43
			c := sessions(t, spec, 20)
			if reflect.DeepEqual(a, c) {
				t.Fatal("seeds 42 and 43 gave the same sessions")
			}
		})
	}
}

// tokens estimates a text's length in tokens the way the generator sizes
// it (characters over characters per token).
func tokens(s string, cpt float64) float64 { return float64(len(s)) / cpt }

func TestShapes(t *testing.T) {
	t.Run("control prompts are unique and sized", func(t *testing.T) {
		spec := DefaultSpec(Control)
		spec.PromptTokens = Const(1000)
		spec.OutputTokens = Uniform(10, 20)
		seen := map[string]bool{}
		for _, s := range sessions(t, spec, 50) {
			if len(s.Turns) != 1 || s.System != "" || s.Group != -1 {
				t.Fatalf("control session %+v: want one turn, no system prompt", s.ID)
			}
			u := s.Turns[0].User
			if seen[u[:64]] {
				t.Fatal("two control prompts share their first 64 characters")
			}
			seen[u[:64]] = true
			if n := tokens(u, spec.CharsPerToken); math.Abs(n-1000) > 5 {
				t.Errorf("prompt of %.0f tokens, want about 1000", n)
			}
			if m := s.Turns[0].MaxTokens; m < 10 || m > 20 {
				t.Errorf("max tokens %d outside 10-20", m)
			}
		}
	})
	t.Run("shared prefixes are shared, suffixes unique", func(t *testing.T) {
		spec := DefaultSpec(SharedPrefix)
		spec.Prefixes, spec.PrefixTokens, spec.SuffixTokens = 3, Const(2000), Const(100)
		byGroup := map[int]string{}
		suffixes := map[string]bool{}
		for _, s := range sessions(t, spec, 60) {
			if s.Group < 0 || s.Group >= 3 {
				t.Fatalf("group %d", s.Group)
			}
			if p, ok := byGroup[s.Group]; ok && p != s.System {
				t.Fatalf("group %d has two different prefixes", s.Group)
			}
			byGroup[s.Group] = s.System
			if n := tokens(s.System, spec.CharsPerToken); math.Abs(n-2000) > 5 {
				t.Errorf("prefix of %.0f tokens, want about 2000", n)
			}
			if suffixes[s.Turns[0].User] {
				t.Error("a suffix repeats")
			}
			suffixes[s.Turns[0].User] = true
		}
		if len(byGroup) != 3 {
			t.Errorf("%d prefixes used in 60 sessions, want 3", len(byGroup))
		}
		if byGroup[0] == byGroup[1] {
			t.Error("distinct groups share a prefix")
		}
	})
	t.Run("multi-turn histories grow with the answers", func(t *testing.T) {
		spec := DefaultSpec(MultiTurn)
		spec.Turns = Uniform(2, 5)
		for _, s := range sessions(t, spec, 20) {
			if len(s.Turns) < 2 || len(s.Turns) > 5 || s.System == "" {
				t.Fatalf("session with %d turns, system %d chars", len(s.Turns), len(s.System))
			}
			answers := []string{}
			for k := range s.Turns {
				msgs := s.Messages(k, answers)
				if len(msgs) != 2+2*k {
					t.Fatalf("turn %d: %d messages, want %d", k, len(msgs), 2+2*k)
				}
				if msgs[0].Role != "system" || msgs[len(msgs)-1].Content != s.Turns[k].User {
					t.Fatalf("turn %d: history does not start with the system prompt or end with the turn's message", k)
				}
				for j := 0; j < k; j++ {
					if msgs[2+2*j].Role != "assistant" || msgs[2+2*j].Content != answers[j] {
						t.Fatalf("turn %d: message %d is not answer %d", k, 2+2*j, j)
					}
				}
				answers = append(answers, strings.Repeat("answer ", k+1))
			}
		}
	})
}

func TestPrefixesIndependentOfSessionStream(t *testing.T) {
	spec := DefaultSpec(SharedPrefix)
	spec.PrefixTokens = Const(50)
	a, _ := NewGenerator(spec)
	spec.SuffixTokens = Const(7)
	b, _ := NewGenerator(spec)
	if !reflect.DeepEqual(a.prefixes, b.prefixes) {
		t.Error("changing the suffix length changed the prefixes")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"default is valid", func(*Spec) {}, ""},
		{"unknown kind", func(s *Spec) { s.Kind = "chat" }, "unknown workload"},
		{"no prefixes", func(s *Spec) { s.Prefixes = 0 }, "prefixes 0"},
		{"unset distribution", func(s *Spec) { s.SuffixTokens = Dist{} }, "suffix-tokens"},
		{"implausible chars per token", func(s *Spec) { s.CharsPerToken = 0.1 }, "chars-per-token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSpec(SharedPrefix)
			tc.mutate(&s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseDist(t *testing.T) {
	tests := []struct {
		in           string
		want         string
		lo, hi, mean float64
		err          bool
	}{
		{in: "256", want: "256", lo: 256, hi: 256, mean: 256},
		{in: "128-384", want: "uniform:128-384", lo: 128, hi: 384, mean: 256},
		{in: "uniform:1-3", want: "uniform:1-3", lo: 1, hi: 3, mean: 2},
		{in: " normal:100,10 ", want: "normal:100,10", lo: 1, hi: 200, mean: 100},
		{in: "normal:100", err: true},
		{in: "uniform:5", err: true},
		{in: "9-3", err: true},
		{in: "0", err: true},
		{in: "-5", err: true},
		{in: "NaN", err: true},
		{in: "1e99", err: true},
		{in: "zipf:1", err: true},
		{in: "", err: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			d, err := ParseDist(tc.in)
			if tc.err {
				if err == nil {
					t.Fatalf("ParseDist(%q) = %v, want an error", tc.in, d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.String() != tc.want || d.Mean() != tc.mean {
				t.Errorf("%q: String %q mean %v, want %q %v", tc.in, d, d.Mean(), tc.want, tc.mean)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 1000 {
				v := float64(d.Sample(r))
				if v < tc.lo || v > tc.hi || int(v) > d.Max() {
					t.Fatalf("sample %v outside [%v, %v] (max %d)", v, tc.lo, tc.hi, d.Max())
				}
			}
		})
	}
}

func FuzzParseDist(f *testing.F) {
	for _, s := range []string{"256", "1-2", "uniform:3-9", "normal:5,2", "normal:0.4,0.1", "1.5-1.7", "uniform:-", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDist(s)
		if err != nil {
			return
		}
		back, err := ParseDist(d.String())
		if err != nil || back != d {
			t.Fatalf("%q → %q does not parse back (%v)", s, d, err)
		}
		r := rand.New(rand.NewPCG(3, 4))
		for range 50 {
			if v := d.Sample(r); v < 1 || v > d.Max() {
				t.Fatalf("%q: sample %d outside [1, %d]", s, v, d.Max())
			}
		}
	})
}

func TestCalibrate(t *testing.T) {
	// A server with a 20-token template and 3 characters per token.
	count := func(_ context.Context, text string) (int, error) { return 20 + len(text)/3, nil }
	cpt, err := Calibrate(context.Background(), count)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(cpt-3) > 0.01 {
		t.Errorf("calibrated %.3f characters per token, want 3", cpt)
	}
	if _, err := Calibrate(context.Background(), func(context.Context, string) (int, error) { return 7, nil }); err == nil {
		t.Error("a server that counts every prompt the same calibrated without error")
	}
	boom := errors.New("boom")
	if _, err := Calibrate(context.Background(), func(context.Context, string) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("err %v, want the probe's", err)
	}
}
