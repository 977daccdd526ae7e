// Package workload generates the seeded, reproducible request streams the
// load generator sends: unique prompts (control), long prefixes shared by
// many requests (shared-prefix) and conversations replayed turn by turn
// (multi-turn). Text is drawn from a fixed word list and sized in tokens
// through a characters-per-token factor that Calibrate measures against the
// server, so lengths are right whatever tokenizer the server runs.
package workload

import (
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
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
)

// Kinds lists every workload in the order reports show them.
var Kinds = []Kind{SharedPrefix, MultiTurn, Control}

// ParseKind checks a workload name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown workload %q (want control, shared-prefix or multi-turn)", s)
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
)

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
	fs.Float64Var(&s.CharsPerToken, "chars-per-token", s.CharsPerToken, "characters of generated text per token (measured against the server unless --calibrate=false)")
}

// Validate reports every unusable field of the spec's kind.
func (s Spec) Validate() error {
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
	// Group is the shared prefix a shared-prefix session uses; -1 otherwise.
	Group int
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
}

// NewGenerator validates spec and prepares its shared prefixes.
func NewGenerator(spec Spec) (*Generator, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(spec.Kind))
	g := &Generator{spec: spec, rng: rand.New(rand.NewPCG(spec.Seed, h.Sum64()))}
	if spec.Kind == SharedPrefix {
		// Prefixes come from their own stream so that changing the number
		// of prefixes does not reshuffle every suffix.
		pr := rand.New(rand.NewPCG(spec.Seed, h.Sum64()^0x9e3779b97f4a7c15))
		for range spec.Prefixes {
			g.prefixes = append(g.prefixes, g.text(pr, spec.PrefixTokens.Sample(pr)))
		}
	}
	return g, nil
}

// Spec is the generator's spec.
func (g *Generator) Spec() Spec { return g.spec }

// Next returns the next session.
func (g *Generator) Next() Session {
	s := Session{ID: g.next, Group: -1}
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
