package router

import (
	"fmt"
	"os"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/tokenizer/hf"
)

// Tokenizer kinds for --tokenizers.
const (
	tokenizerSimple = "simple"
	tokenizerNone   = "none"
	tokenizerHF     = "hf:" // followed by a Hugging Face model directory
	anyModel        = "*"
)

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

type tokenizerSpec struct{ model, kind string }

// parseTokenizers checks "model=kind,..." without loading anything.
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
		switch {
		case kind == tokenizerSimple, kind == tokenizerNone:
		case strings.HasPrefix(kind, tokenizerHF):
			dir := strings.TrimPrefix(kind, tokenizerHF)
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return nil, fmt.Errorf("model %q: %q is not a Hugging Face model directory", model, dir)
			}
		default:
			return nil, fmt.Errorf("model %q: tokenizer %q: want %s, %s or %sDIR", model, kind, tokenizerSimple, tokenizerNone, tokenizerHF)
		}
		out = append(out, tokenizerSpec{model: model, kind: kind})
	}
	return out, nil
}

// loadTokenizers builds the tokenizers of a parsed spec. Models without an
// entry and no "*" entry get none. Tokenizers are stateless after loading,
// so one instance per kind is shared.
func loadTokenizers(specs []tokenizerSpec) (tokenizers, error) {
	t := tokenizers{byModel: map[string]tokenizer.Tokenizer{}}
	loaded := map[string]tokenizer.Tokenizer{}
	for _, s := range specs {
		tok, ok := loaded[s.kind]
		if !ok {
			switch {
			case s.kind == tokenizerSimple:
				tok = tokenizer.NewSimple()
			case strings.HasPrefix(s.kind, tokenizerHF):
				h, err := hf.LoadDir(strings.TrimPrefix(s.kind, tokenizerHF))
				if err != nil {
					return t, fmt.Errorf("model %q: %w", s.model, err)
				}
				tok = h
			}
			loaded[s.kind] = tok
		}
		if s.model == anyModel {
			t.other = tok
		} else {
			t.byModel[s.model] = tok
		}
	}
	return t, nil
}
