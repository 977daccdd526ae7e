// Package workload generates the seeded, reproducible request streams the
// load generator sends: unique prompts (control), long prefixes shared by
// many requests (shared-prefix), conversations replayed turn by turn
// (multi-turn) and groups of users whose system prompts together fill most
// of the fleet's KV cache (prefix-pressure). Text is drawn from a fixed
// word list and sized in tokens through a characters-per-token factor that
// Calibrate measures against the server, so lengths are right whatever
// tokenizer the server runs.
//
// # prefix-pressure
//
// llm-d's hardest published precise-prefix case is 150 groups, each with a
// 6,000-token system prompt, 5 users per group asking 1,200-token
// questions with 1,000 output tokens, Poisson arrivals, the groups'
// prefixes together filling about 73 % of the fleet's KV cache: a router
// that does not know exactly which prefixes each worker still holds sends
// requests where their prefix was evicted, and the recomputed prefixes
// evict more. What carries over to another fleet is the ratio of the
// prefixes to the KV cache, not the count of groups, so the groups here are
// derived from the fleet's capacity (GroupsForKV):
//
//	groups = round(kv-fill × fleet KV tokens / prefix tokens)
//
// The fleet's KV tokens are what the workers report, not a constant: a
// `switchyard sim` worker exports vLLM's cache_config_info, whose
// num_gpu_blocks (the pool including vLLM's reserved null block) and
// block_size `loadtest compare` reads from a probe worker started with the
// run's --sim-arg flags, and uses (num_gpu_blocks − 1) × block_size ×
// workers. With the simulator's defaults (internal/sim/engine: a 48 GB
// L40S at gpu_memory_utilization 0.9 holding 27 GB of FP8 weights and 2 GB
// of overhead leaves 14.47 GB; 507,904 B of KV per token × 16-token blocks
// gives 1,781 blocks) that is 1,780 × 16 = 28,480 tokens per worker,
// 85,440 on the default 3 workers; 73 % of it is 62,371 tokens, 20.8
// prefixes of 3,000 tokens: 21 groups (73.7 %). `loadtest run`, which
// cannot see the fleet, takes --pressure-kv-tokens or --pressure-groups.
//
// The prompts are llm-d's halved (3,000-token prefixes, 600-token
// questions, 500 output tokens), keeping its ratios — the system prompt 5×
// the question, the output 5/6 of it, the prefixes ≈ 73 % of the KV cache —
// so that a request decodes in about half the time and a run fits in a few
// minutes at time scale 10; with half-size prefixes the same KV share takes
// twice the groups, so the cache holds as many distinct prefixes per token
// as llm-d's.
//
// Each session is one independent request: a user of a group asks a new
// question under the group's system prompt, with no history. That is
// llm-d's shape — its users ask several questions over time, each sharing
// only the group prefix — and keeping the requests single-turn isolates
// what the workload measures: whether the router knows where each group's
// prefix is still cached. Conversations would add their growing histories,
// a second cache effect that multi-turn already measures. The users set
// the mix: sessions cycle through the groups × users-per-group users in a
// seeded random order per round, so every group asks users-per-group
// questions per round, in shuffled order, and Poisson arrivals then space
// them.
package workload

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
)

// Kind names a workload shape.
type Kind string

// Workload kinds.
const (
	Control      Kind = "control"
	SharedPrefix Kind = "shared-prefix"
	MultiTurn    Kind = "multi-turn"
	// PrefixPressure is llm-d's precise-prefix shape (see the package
	// doc).
	PrefixPressure Kind = "prefix-pressure"
)

// Kinds lists every workload in the order reports show them.
var Kinds = []Kind{SharedPrefix, MultiTurn, Control, PrefixPressure}

// DefaultKinds are the routing benchmark's workloads, what `loadtest
// compare` runs without --workloads: prefix-pressure, an open-loop shape
// measured at a rate, is run on request.
var DefaultKinds = []Kind{SharedPrefix, MultiTurn, Control}

// ParseKind checks a workload name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown workload %q (want control, shared-prefix, multi-turn or prefix-pressure)", s)
}

// DefaultCharsPerToken is the text size of a token before calibration:
// about four characters of English per token, for BPE vocabularies and the
// simulator's tokenizer alike.
const DefaultCharsPerToken = 4.0

// Spec describes a workload. Lengths are in tokens. Only the fields of its
// Kind matter; the defaults follow the reference benchmark's shapes (long
// shared system prompts, growing conversations).
type Spec struct {
	Kind Kind   `json:"kind"`
	Seed uint64 `json:"seed"`
	// OutputTokens is max_tokens of a control or shared-prefix request.
	OutputTokens Dist `json:"output_tokens,omitzero"`
	// PromptTokens is the prompt length of a control request; the default
	// is a shared-prefix prompt's length (prefix plus suffix), so that
	// control differs from shared-prefix only in sharing nothing.
	PromptTokens Dist `json:"prompt_tokens,omitzero"`
	// Prefixes is how many distinct shared prefixes shared-prefix requests
	// draw from (uniformly); PrefixTokens sizes each one, SuffixTokens each
	// request's unique suffix.
	Prefixes     int  `json:"prefixes,omitzero"`
	PrefixTokens Dist `json:"prefix_tokens,omitzero"`
	SuffixTokens Dist `json:"suffix_tokens,omitzero"`
	// Turns is the length of a multi-turn conversation; SystemTokens its
	// own system prompt, UserTokens each user message, AnswerTokens
	// max_tokens of each turn.
	Turns        Dist `json:"turns,omitzero"`
	SystemTokens Dist `json:"system_tokens,omitzero"`
	UserTokens   Dist `json:"user_tokens,omitzero"`
	AnswerTokens Dist `json:"answer_tokens,omitzero"`
	// Prefix-pressure (see the package doc). PressureGroups is the number
	// of groups; 0 derives it from PressureKVTokens, the fleet's KV cache
	// in tokens, and PressureKVFill, the share of it the groups' prefixes
	// fill. Each group has a system prompt of PressurePrefixTokens and
	// PressureUsers users; each question is PressureQuestionTokens long
	// and asks for PressureOutputTokens.
	PressureGroups         int     `json:"pressure_groups,omitzero"`
	PressureKVTokens       int     `json:"pressure_kv_tokens,omitzero"`
	PressureKVFill         float64 `json:"pressure_kv_fill,omitzero"`
	PressurePrefixTokens   int     `json:"pressure_prefix_tokens,omitzero"`
	PressureUsers          int     `json:"pressure_users,omitzero"`
	PressureQuestionTokens Dist    `json:"pressure_question_tokens,omitzero"`
	PressureOutputTokens   Dist    `json:"pressure_output_tokens,omitzero"`
	// CharsPerToken converts a token count to a text length.
	CharsPerToken float64 `json:"chars_per_token"`
}

// Default shapes, calibrated against the reference benchmark's figures on
// the default simulated fleet (loadtest/README.md): 128 output tokens give
// shared prefix the reference's E2E gain (−45 %); multi-turn conversations
// of ~6k tokens fit about a dozen at a time in three ~28k-token KV caches,
// so a router can keep 8 clients' conversations cached but not 16 (the
// reference's router met its SLO at 8 clients, not beyond), and 16–48-token
// answers leave it about 1.8 s of decoding per turn, as the reference's E2E
// implies.
var (
	DefaultOutputTokens = Const(128)
	DefaultPromptTokens = Uniform(8128, 8384)
	DefaultPrefixes     = 6
	DefaultPrefixTokens = Const(8000)
	DefaultSuffixTokens = Uniform(128, 384)
	DefaultTurns        = Uniform(6, 12)
	DefaultSystemTokens = Const(4000)
	DefaultUserTokens   = Uniform(200, 600)
	DefaultAnswerTokens = Uniform(16, 48)
	// Prefix-pressure: llm-d's 6,000 / 1,200 / 1,000 tokens halved, its 5
	// users per group and its 73 % KV fill (see the package doc).
	DefaultPressureKVFill         = 0.73
	DefaultPressurePrefixTokens   = 3000
	DefaultPressureUsers          = 5
	DefaultPressureQuestionTokens = Const(600)
	DefaultPressureOutputTokens   = Const(500)
)

// GroupsForKV is the number of prefixTokens-long group prefixes that fill
// the share fill of a KV cache of kvTokens tokens, to the nearest group (at
// least one): llm-d's rule, its prefixes at about 73 % of the fleet's KV.
func GroupsForKV(kvTokens int, fill float64, prefixTokens int) int {
	if kvTokens <= 0 || prefixTokens <= 0 || !(fill > 0) {
		return 0
	}
	return max(1, int(math.Round(fill*float64(kvTokens)/float64(prefixTokens))))
}

// FleetKVTokens is the KV cache of workers vLLM workers that each report
// numGPUBlocks blocks of blockSize tokens (cache_config_info): vLLM's pool
// includes a reserved null block that holds no tokens.
func FleetKVTokens(numGPUBlocks, blockSize, workers int) int {
	if numGPUBlocks < 2 || blockSize < 1 || workers < 1 {
		return 0
	}
	return (numGPUBlocks - 1) * blockSize * workers
}

// Groups is the number of prefix-pressure groups: PressureGroups, or the
// count derived from the KV capacity.
func (s Spec) Groups() int {
	if s.PressureGroups > 0 {
		return s.PressureGroups
	}
	return GroupsForKV(s.PressureKVTokens, s.PressureKVFill, s.PressurePrefixTokens)
}

// DefaultSpec is the default shape of kind.
func DefaultSpec(kind Kind) Spec {
	return Spec{
		Kind:          kind,
		Seed:          1,
		OutputTokens:  DefaultOutputTokens,
		PromptTokens:  DefaultPromptTokens,
		Prefixes:      DefaultPrefixes,
		PrefixTokens:  DefaultPrefixTokens,
		SuffixTokens:  DefaultSuffixTokens,
		Turns:         DefaultTurns,
		SystemTokens:  DefaultSystemTokens,
		UserTokens:    DefaultUserTokens,
		AnswerTokens:  DefaultAnswerTokens,
		CharsPerToken: DefaultCharsPerToken,

		PressureKVFill:         DefaultPressureKVFill,
		PressurePrefixTokens:   DefaultPressurePrefixTokens,
		PressureUsers:          DefaultPressureUsers,
		PressureQuestionTokens: DefaultPressureQuestionTokens,
		PressureOutputTokens:   DefaultPressureOutputTokens,
	}
}

// Shape returns the spec with the fields its kind does not use cleared, so
// recorded parameters show only what shaped the run.
func (s Spec) Shape() Spec {
	out := Spec{Kind: s.Kind, Seed: s.Seed, CharsPerToken: s.CharsPerToken}
	switch s.Kind {
	case Control:
		out.PromptTokens, out.OutputTokens = s.PromptTokens, s.OutputTokens
	case SharedPrefix:
		out.Prefixes, out.PrefixTokens, out.SuffixTokens, out.OutputTokens = s.Prefixes, s.PrefixTokens, s.SuffixTokens, s.OutputTokens
	case MultiTurn:
		out.Turns, out.SystemTokens, out.UserTokens, out.AnswerTokens = s.Turns, s.SystemTokens, s.UserTokens, s.AnswerTokens
	case PrefixPressure:
		// The groups as resolved, beside what they were derived from.
		out.PressureGroups, out.PressureKVTokens, out.PressureKVFill = s.Groups(), s.PressureKVTokens, s.PressureKVFill
		out.PressurePrefixTokens, out.PressureUsers = s.PressurePrefixTokens, s.PressureUsers
		out.PressureQuestionTokens, out.PressureOutputTokens = s.PressureQuestionTokens, s.PressureOutputTokens
	}
	return out
}

// RegisterFlags registers the shape flags (not the kind) on fs, defaulting
// to DefaultSpec's values.
func (s *Spec) RegisterFlags(fs *flag.FlagSet) {
	kind := s.Kind
	*s = DefaultSpec(kind)
	fs.Uint64Var(&s.Seed, "seed", s.Seed, "workload seed: the same seed gives the same prompts")
	fs.Var(&s.OutputTokens, "output-tokens", "control and shared-prefix: max_tokens of each request (distribution: N, LO-HI, normal:MEAN,SD)")
	fs.Var(&s.PromptTokens, "prompt-tokens", "control: prompt length in tokens (distribution)")
	fs.IntVar(&s.Prefixes, "prefixes", s.Prefixes, "shared-prefix: number of distinct shared prefixes")
	fs.Var(&s.PrefixTokens, "prefix-tokens", "shared-prefix: length of each shared prefix in tokens (distribution)")
	fs.Var(&s.SuffixTokens, "suffix-tokens", "shared-prefix: length of each request's unique suffix (distribution)")
	fs.Var(&s.Turns, "turns", "multi-turn: turns per conversation (distribution)")
	fs.Var(&s.SystemTokens, "system-tokens", "multi-turn: system prompt of each conversation in tokens (distribution)")
	fs.Var(&s.UserTokens, "user-tokens", "multi-turn: each user message in tokens (distribution)")
	fs.Var(&s.AnswerTokens, "answer-tokens", "multi-turn: max_tokens of each turn's answer (distribution)")
	fs.IntVar(&s.PressureGroups, "pressure-groups", 0, "prefix-pressure: number of groups, each with its own system prompt (0: round(--pressure-kv-fill × --pressure-kv-tokens / --pressure-prefix-tokens))")
	fs.IntVar(&s.PressureKVTokens, "pressure-kv-tokens", 0, "prefix-pressure: the fleet's KV cache in tokens, which the groups' prefixes fill to --pressure-kv-fill (compare: measured from the simulated workers' cache_config_info when 0; run: required unless --pressure-groups)")
	fs.Float64Var(&s.PressureKVFill, "pressure-kv-fill", s.PressureKVFill, "prefix-pressure: share of the fleet's KV cache the groups' prefixes fill together (llm-d's case: 0.73)")
	fs.IntVar(&s.PressurePrefixTokens, "pressure-prefix-tokens", s.PressurePrefixTokens, "prefix-pressure: each group's system prompt in tokens (llm-d: 6000, halved)")
	fs.IntVar(&s.PressureUsers, "pressure-users", s.PressureUsers, "prefix-pressure: users per group, each asking independent questions under the group's system prompt")
	fs.Var(&s.PressureQuestionTokens, "pressure-question-tokens", "prefix-pressure: each question in tokens (distribution; llm-d: 1200, halved)")
	fs.Var(&s.PressureOutputTokens, "pressure-output-tokens", "prefix-pressure: max_tokens of each answer (distribution; llm-d: 1000, halved)")
	fs.Float64Var(&s.CharsPerToken, "chars-per-token", s.CharsPerToken, "characters of generated text per token (measured against the server unless --calibrate=false)")
}

// Validate reports every unusable field of the spec's kind.
func (s Spec) Validate() error { return s.validate(true) }

// ValidateBeforeKV is Validate for a caller that will measure the fleet's
// KV cache and set PressureKVTokens before generating (`loadtest
// compare`): prefix-pressure may then give neither groups nor capacity.
func (s Spec) ValidateBeforeKV() error { return s.validate(false) }

func (s Spec) validate(needGroups bool) error {
	var errs []error
	if _, err := ParseKind(string(s.Kind)); err != nil {
		errs = append(errs, err)
	}
	switch s.Kind {
	case Control:
		errs = append(errs, s.PromptTokens.validate("prompt-tokens"), s.OutputTokens.validate("output-tokens"))
	case SharedPrefix:
		errs = append(errs, s.OutputTokens.validate("output-tokens"))
		if s.Prefixes < 1 || s.Prefixes > 1<<16 {
			errs = append(errs, fmt.Errorf("prefixes %d: want 1 to 65536", s.Prefixes))
		}
		errs = append(errs, s.PrefixTokens.validate("prefix-tokens"), s.SuffixTokens.validate("suffix-tokens"))
	case MultiTurn:
		errs = append(errs, s.Turns.validate("turns"), s.SystemTokens.validate("system-tokens"), s.UserTokens.validate("user-tokens"), s.AnswerTokens.validate("answer-tokens"))
		if s.Turns.Max() > 1000 {
			errs = append(errs, fmt.Errorf("turns %s: at most 1000", s.Turns))
		}
	case PrefixPressure:
		errs = append(errs, s.PressureQuestionTokens.validate("pressure-question-tokens"), s.PressureOutputTokens.validate("pressure-output-tokens"))
		if s.PressurePrefixTokens < 1 || s.PressurePrefixTokens > MaxDistValue {
			errs = append(errs, fmt.Errorf("pressure-prefix-tokens %d: want 1 to %d", s.PressurePrefixTokens, MaxDistValue))
		}
		if s.PressureUsers < 1 || s.PressureUsers > 1000 {
			errs = append(errs, fmt.Errorf("pressure-users %d: want 1 to 1000", s.PressureUsers))
		}
		if s.PressureGroups < 0 || s.PressureKVTokens < 0 {
			errs = append(errs, fmt.Errorf("pressure-groups %d, pressure-kv-tokens %d: must not be negative", s.PressureGroups, s.PressureKVTokens))
		}
		if !(s.PressureKVFill > 0 && s.PressureKVFill <= 1) {
			errs = append(errs, fmt.Errorf("pressure-kv-fill %v: want a share in (0, 1]", s.PressureKVFill))
		}
		switch g := s.Groups(); {
		case s.PressureGroups == 0 && s.PressureKVTokens == 0:
			if !needGroups {
				break
			}
			errs = append(errs, errors.New("prefix-pressure: set --pressure-groups, or --pressure-kv-tokens (the fleet's KV cache) to derive them"))
		case g < 1 || g > 1<<16:
			errs = append(errs, fmt.Errorf("prefix-pressure: %d groups: want 1 to 65536", g))
		case g*s.PressureUsers > 1<<20:
			errs = append(errs, fmt.Errorf("prefix-pressure: %d groups × %d users: at most %d users", g, s.PressureUsers, 1<<20))
		}
	}
	if !(s.CharsPerToken >= 0.5 && s.CharsPerToken <= 64) {
		errs = append(errs, fmt.Errorf("chars-per-token %v: want 0.5 to 64", s.CharsPerToken))
	}
	return errors.Join(errs...)
}

// Session is a unit of work a client plays from start to end: one request
// for control and shared-prefix, a conversation for multi-turn.
type Session struct {
	// ID numbers sessions in generation order from 0.
	ID int
	// Group is the shared prefix a shared-prefix or prefix-pressure
	// session uses; -1 otherwise.
	Group int
	// User is the prefix-pressure user who asks (numbered across groups:
	// users Group×users-per-group on belong to Group); -1 otherwise.
	User int
	// System is the system message; empty means none.
	System string
	Turns  []Turn
}

// Turn is one user message and the completion length it asks for.
type Turn struct {
	User      string
	MaxTokens int
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Messages builds the request of turn k given the answers to the turns
// before it: the whole history, as a chat client sends it.
func (s *Session) Messages(k int, answers []string) []Message {
	msgs := make([]Message, 0, 2*k+2)
	if s.System != "" {
		msgs = append(msgs, Message{Role: "system", Content: s.System})
	}
	for j := 0; j < k; j++ {
		msgs = append(msgs, Message{Role: "user", Content: s.Turns[j].User})
		answer := ""
		if j < len(answers) {
			answer = answers[j]
		}
		msgs = append(msgs, Message{Role: "assistant", Content: answer})
	}
	return append(msgs, Message{Role: "user", Content: s.Turns[k].User})
}

// Generator yields a spec's sessions in a fixed order. It is not safe for
// concurrent use.
type Generator struct {
	spec     Spec
	rng      *rand.Rand
	prefixes []string
	next     int
	// users is prefix-pressure's current round: every user once, in a
	// seeded order.
	users []int
}

// NewGenerator validates spec and prepares its shared prefixes.
func NewGenerator(spec Spec) (*Generator, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(spec.Kind))
	g := &Generator{spec: spec, rng: rand.New(rand.NewPCG(spec.Seed, h.Sum64()))}
	// Prefixes come from their own stream so that changing the number
	// of prefixes does not reshuffle every suffix.
	pr := rand.New(rand.NewPCG(spec.Seed, h.Sum64()^0x9e3779b97f4a7c15))
	switch spec.Kind {
	case SharedPrefix:
		for range spec.Prefixes {
			g.prefixes = append(g.prefixes, g.text(pr, spec.PrefixTokens.Sample(pr)))
		}
	case PrefixPressure:
		for range spec.Groups() {
			g.prefixes = append(g.prefixes, g.text(pr, spec.PressurePrefixTokens))
		}
	}
	return g, nil
}

// Spec is the generator's spec.
func (g *Generator) Spec() Spec { return g.spec }

// Fork returns a generator of other sessions over the same shared
// prefixes: another population of the same workload (the users of the
// same groups, say, reaching the workers some other way). stream tells
// forks apart; the same stream gives the same sessions.
func (g *Generator) Fork(stream uint64) *Generator {
	h := fnv.New64a()
	h.Write([]byte(g.spec.Kind))
	return &Generator{spec: g.spec, prefixes: g.prefixes, rng: rand.New(rand.NewPCG(g.spec.Seed^(stream*0x9e3779b97f4a7c15), h.Sum64()+stream))}
}

// Next returns the next session.
func (g *Generator) Next() Session {
	s := Session{ID: g.next, Group: -1, User: -1}
	g.next++
	r, spec := g.rng, g.spec
	switch spec.Kind {
	case Control:
		s.Turns = []Turn{{User: g.text(r, spec.PromptTokens.Sample(r)), MaxTokens: spec.OutputTokens.Sample(r)}}
	case SharedPrefix:
		s.Group = r.IntN(len(g.prefixes))
		s.System = g.prefixes[s.Group]
		s.Turns = []Turn{{User: g.text(r, spec.SuffixTokens.Sample(r)), MaxTokens: spec.OutputTokens.Sample(r)}}
	case MultiTurn:
		s.System = g.text(r, spec.SystemTokens.Sample(r))
		n := spec.Turns.Sample(r)
		s.Turns = make([]Turn, n)
		for i := range s.Turns {
			s.Turns[i] = Turn{User: g.text(r, spec.UserTokens.Sample(r)), MaxTokens: spec.AnswerTokens.Sample(r)}
		}
	case PrefixPressure:
		if len(g.users) == 0 {
			g.users = r.Perm(len(g.prefixes) * spec.PressureUsers)
		}
		s.User, g.users = g.users[0], g.users[1:]
		s.Group = s.User / spec.PressureUsers
		s.System = g.prefixes[s.Group]
		s.Turns = []Turn{{User: g.text(r, spec.PressureQuestionTokens.Sample(r)), MaxTokens: spec.PressureOutputTokens.Sample(r)}}
	}
	return s
}

// text is prose-like filler of about tokens tokens: words from the list,
// with a full stop every few words.
func (g *Generator) text(r *rand.Rand, tokens int) string {
	return Text(r, tokens, g.spec.CharsPerToken)
}

// Text draws about tokens tokens of text at charsPerToken.
func Text(r *rand.Rand, tokens int, charsPerToken float64) string {
	want := int(float64(tokens)*charsPerToken + 0.5)
	var b strings.Builder
	b.Grow(want + 16)
	untilStop := 6 + r.IntN(12)
	for b.Len() < want {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
		if untilStop--; untilStop == 0 {
			b.WriteByte('.')
			untilStop = 6 + r.IntN(12)
		}
	}
	return b.String()
}
