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

// simBlocks and simBlockSize are what a default `switchyard sim` worker
// reports in cache_config_info (internal/sim/engine: 1,781 blocks of 16
// tokens, derived from a 48 GB GPU in the package doc's arithmetic);
// compare reads them from a running worker, the tests from here.
const simBlocks, simBlockSize = 1781, 16

// testSpec is kind's default spec, prefix-pressure's sized for the default
// 3-worker simulated fleet.
func testSpec(kind Kind) Spec {
	spec := DefaultSpec(kind)
	if kind == PrefixPressure {
		spec.PressureKVTokens = FleetKVTokens(simBlocks, simBlockSize, 3)
	}
	return spec
}

func TestDeterministicPerSeed(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			spec := testSpec(kind)
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

// TestPrefixPressureGroupsFromKV: the groups' prefixes fill the share of
// the fleet's KV cache llm-d's did, to the nearest group.
func TestPrefixPressureGroupsFromKV(t *testing.T) {
	kv := FleetKVTokens(simBlocks, simBlockSize, 3)
	if kv != 3*1780*16 {
		t.Fatalf("fleet KV %d tokens: want 3 workers × 1,780 usable blocks × 16", kv)
	}
	spec := testSpec(PrefixPressure)
	g := spec.Groups()
	// 0.73 × 85,440 / 3,000 = 20.8.
	if g != 21 {
		t.Errorf("%d groups on the default fleet, want 21", g)
	}
	for _, tc := range []struct {
		kv     int
		fill   float64
		prefix int
	}{{kv, 0.73, 3000}, {kv, 0.73, 6000}, {kv, 0.5, 1500}, {FleetKVTokens(simBlocks, simBlockSize, 8), 0.73, 6000}, {4 << 20, 0.73, 6000}} {
		g := GroupsForKV(tc.kv, tc.fill, tc.prefix)
		// The nearest group: the fill is off by at most half a prefix.
		if got := float64(g*tc.prefix) / float64(tc.kv); math.Abs(got-tc.fill) > float64(tc.prefix)/2/float64(tc.kv)+1e-12 {
			t.Errorf("%+v: %d groups fill %.3f of the KV cache, want %.2f to half a prefix", tc, g, got, tc.fill)
		}
	}
	// llm-d's own case: 150 groups of 6,000 tokens at 73 % is a fleet of
	// about 1.23M tokens of KV.
	if g := GroupsForKV(1_233_000, 0.73, 6000); g != 150 {
		t.Errorf("llm-d's fleet: %d groups, want 150", g)
	}
	if g := GroupsForKV(100, 0.73, 6000); g != 1 {
		t.Errorf("a cache smaller than a prefix: %d groups, want at least 1", g)
	}
	if GroupsForKV(0, 0.73, 6000) != 0 || FleetKVTokens(1, 16, 3) != 0 {
		t.Error("no capacity must give no groups")
	}
	spec.PressureGroups = 7
	if spec.Groups() != 7 {
		t.Errorf("--pressure-groups 7 gave %d groups", spec.Groups())
	}
	if sh := testSpec(PrefixPressure).Shape(); sh.PressureGroups != 21 || sh.PressureKVTokens != kv || sh.Prefixes != 0 {
		t.Errorf("shape %+v: want the derived groups recorded beside the capacity", sh)
	}
}

func TestPrefixPressureShape(t *testing.T) {
	spec := testSpec(PrefixPressure)
	spec.PressureQuestionTokens, spec.PressureOutputTokens = Const(600), Const(500)
	groups, users := spec.Groups(), spec.PressureUsers
	n := 3 * groups * users
	prefix := map[int]string{}
	questions := map[string]bool{}
	asked := map[int]int{}
	ss := sessions(t, spec, n)
	for i, s := range ss {
		if s.Group < 0 || s.Group >= groups || s.User < 0 || s.User/users != s.Group {
			t.Fatalf("session %d: group %d, user %d of %d groups × %d users", i, s.Group, s.User, groups, users)
		}
		if p, ok := prefix[s.Group]; ok && p != s.System {
			t.Fatalf("group %d has two system prompts", s.Group)
		}
		prefix[s.Group] = s.System
		if len(s.Turns) != 1 {
			t.Fatalf("session %d: %d turns, want one question", i, len(s.Turns))
		}
		q := s.Turns[0]
		if questions[q.User] {
			t.Fatal("a question was asked twice")
		}
		questions[q.User] = true
		if n := tokens(s.System, spec.CharsPerToken); math.Abs(n-3000) > 5 {
			t.Errorf("system prompt of %.0f tokens, want about 3000", n)
		}
		if n := tokens(q.User, spec.CharsPerToken); math.Abs(n-600) > 5 {
			t.Errorf("question of %.0f tokens, want about 600", n)
		}
		if q.MaxTokens != 500 {
			t.Errorf("max tokens %d, want 500", q.MaxTokens)
		}
		asked[s.User]++
		// Every round of groups × users sessions has each user once.
		if end := i + 1; end%(groups*users) == 0 {
			for u := range groups * users {
				if asked[u] != end/(groups*users) {
					t.Fatalf("after %d sessions user %d asked %d times, want %d", end, u, asked[u], end/(groups*users))
				}
			}
		}
	}
	if len(prefix) != groups {
		t.Fatalf("%d groups asked, want %d", len(prefix), groups)
	}
	seen := map[string]bool{}
	for _, p := range prefix {
		if seen[p[:64]] {
			t.Fatal("two groups share a system prompt's start")
		}
		seen[p[:64]] = true
	}
	// The system prompt is 5× the question, as in llm-d's case (6,000 and
	// 1,200 tokens).
	if r := float64(spec.PressurePrefixTokens) / spec.PressureQuestionTokens.Mean(); r != 5 {
		t.Errorf("default prefix/question ratio %v, want 5", r)
	}
	// The order is not group by group: the first round mixes them.
	if ss[0].Group == ss[1].Group && ss[1].Group == ss[2].Group && ss[2].Group == ss[3].Group {
		t.Error("the first four sessions come from one group: the round is not shuffled")
	}
}

func TestPrefixPressureValidate(t *testing.T) {
	spec := DefaultSpec(PrefixPressure)
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), "--pressure-kv-tokens") {
		t.Errorf("no groups and no capacity: err %v", err)
	}
	if err := spec.ValidateBeforeKV(); err != nil {
		t.Errorf("before the capacity is measured: %v", err)
	}
	spec.PressureKVFill, spec.PressureUsers, spec.PressurePrefixTokens = 1.5, 0, 0
	spec.PressureOutputTokens = Dist{}
	err := spec.ValidateBeforeKV()
	for _, want := range []string{"pressure-kv-fill", "pressure-users", "pressure-prefix-tokens", "pressure-output-tokens"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err %v: want one mentioning %s", err, want)
		}
	}
	spec = DefaultSpec(PrefixPressure)
	spec.PressureGroups = 70000
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), "70000 groups") {
		t.Errorf("70,000 groups: err %v", err)
	}
}

// TestFork: a fork shares the generator's prefixes and draws other
// sessions; the same stream draws the same ones.
func TestFork(t *testing.T) {
	spec := DefaultSpec(PrefixPressure)
	spec.PressureGroups = 4
	g, err := NewGenerator(spec)
	if err != nil {
		t.Fatal(err)
	}
	a, b := g.Fork(1), g.Fork(1)
	prefixes := map[string]bool{}
	for _, p := range g.prefixes {
		prefixes[p] = true
	}
	differ := false
	for range 8 {
		s, sa, sb := g.Next(), a.Next(), b.Next()
		if !prefixes[sa.System] {
			t.Fatalf("a fork's session has a prefix of its own")
		}
		if sa.Turns[0].User != sb.Turns[0].User || sa.Group != sb.Group {
			t.Fatal("the same stream drew other sessions")
		}
		differ = differ || sa.Turns[0].User != s.Turns[0].User
	}
	if !differ {
		t.Error("the fork drew the generator's own sessions")
	}
}
