package router

import (
	"fmt"
	"os"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/registry"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/harmony"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

// Tokenizer kinds for --tokenizers: "model=kind[:arg],...", "*" for every
// other model.
const (
	tokenizerSimple = "simple"
	anyModel        = "*"
)

// tokenizerKind is one kind of --tokenizers entry: check validates its
// argument without loading anything (config validation), load builds the
// tokenizer; a nil tokenizer is none (the approximate index on prompt
// text).
type tokenizerKind struct {
	check func(arg string) error
	load  func(arg string) (tokenizer.Tokenizer, error)
}

// tokenizerKinds is every kind the router knows. A new tokenizer family
// registers here.
var tokenizerKinds = registry.New[tokenizerKind]("tokenizer")

func init() {
	noArg := func(kind string) func(string) error {
		return func(arg string) error {
			if arg != "" {
				return fmt.Errorf("%s takes no argument", kind)
			}
			return nil
		}
	}
	tokenizerKinds.Register(tokenizerSimple, tokenizerKind{
		check: noArg(tokenizerSimple),
		load:  func(string) (tokenizer.Tokenizer, error) { return tokenizer.NewSimple(), nil },
	})
	tokenizerKinds.Register("none", tokenizerKind{
		check: noArg("none"),
		load:  func(string) (tokenizer.Tokenizer, error) { return nil, nil },
	})
	checkDir := func(dir string) error {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("%q is not a Hugging Face model directory", dir)
		}
		return nil
	}
	tokenizerKinds.Register("hf", tokenizerKind{
		check: checkDir,
		load: func(dir string) (tokenizer.Tokenizer, error) {
			h, err := hf.LoadDir(dir)
			if err != nil {
				return nil, err
			}
			return h, nil
		},
	})
	// gpt-oss: vLLM renders its chat requests with harmony, not with the
	// chat template its directory ships (internal/tokenizer/harmony).
	tokenizerKinds.Register("harmony", tokenizerKind{
		check: checkDir,
		load: func(dir string) (tokenizer.Tokenizer, error) {
			h, err := hf.LoadDir(dir)
			if err != nil {
				return nil, err
			}
			r, err := harmony.New(h.HasAddedToken)
			if err != nil {
				return nil, err
			}
			return h.WithChatRenderer(r), nil
		},
	})
}

// tokenizers maps a model to its tokenizer; nil means none (approximate
// index on prompt text).
type tokenizers struct {
	byModel map[string]tokenizer.Tokenizer
	other   tokenizer.Tokenizer
}

func (t tokenizers) For(model string) tokenizer.Tokenizer {
	if tok, ok := t.byModel[model]; ok {
		return tok
	}
	return t.other
}

type tokenizerSpec struct {
	model, kind, arg string
	k                tokenizerKind
}

// parseTokenizers checks "model=kind[:arg],..." without loading anything.
func parseTokenizers(spec string) ([]tokenizerSpec, error) {
	var out []tokenizerSpec
	seen := map[string]bool{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		model, kind, ok := strings.Cut(part, "=")
		model, kind = strings.TrimSpace(model), strings.TrimSpace(kind)
		if !ok || model == "" {
			return nil, fmt.Errorf("%q: want model=kind", part)
		}
		if seen[model] {
			return nil, fmt.Errorf("model %q listed twice", model)
		}
		seen[model] = true
		kind, arg, _ := strings.Cut(kind, ":")
		k, err := tokenizerKinds.Lookup(kind)
		if err != nil {
			return nil, fmt.Errorf("model %q: %w (hf and harmony take the model directory: hf:DIR)", model, err)
		}
		if err := k.check(arg); err != nil {
			return nil, fmt.Errorf("model %q: %w", model, err)
		}
		out = append(out, tokenizerSpec{model: model, kind: kind, arg: arg, k: k})
	}
	return out, nil
}

// loadTokenizers builds the tokenizers of a parsed spec. Models without an
// entry and no "*" entry get none. Tokenizers are stateless after loading,
// so one instance per kind and argument is shared.
func loadTokenizers(specs []tokenizerSpec) (tokenizers, error) {
	t := tokenizers{byModel: map[string]tokenizer.Tokenizer{}}
	loaded := map[string]tokenizer.Tokenizer{}
	for _, s := range specs {
		key := s.kind + ":" + s.arg
		tok, ok := loaded[key]
		if !ok {
			var err error
			if tok, err = s.k.load(s.arg); err != nil {
				return t, fmt.Errorf("model %q: %w", s.model, err)
			}
			loaded[key] = tok
		}
		if s.model == anyModel {
			t.other = tok
		} else {
			t.byModel[s.model] = tok
		}
	}
	return t, nil
}
