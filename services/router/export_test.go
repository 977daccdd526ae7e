package router

import (
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// RegisterTestTokenizer makes tok the tokenizer kind name, for tests that
// need a tokenizer they control (--tokenizers "*=name").
func RegisterTestTokenizer(name string, tok tokenizer.Tokenizer) {
	tokenizerKinds.Register(name, tokenizerKind{
		check: func(string) error { return nil },
		load:  func(string) (tokenizer.Tokenizer, error) { return tok, nil },
	})
}

// ClassifierSets are the classifier sets the classification benchmarks
// compare, for the end-to-end one.
var ClassifierSets = classifierSets

// RegisterTestClassifier makes c the classifier name (--classifiers name).
func RegisterTestClassifier(name string, c classify.Classifier) {
	classifierRegistry.Register(name, func() (classify.Classifier, error) { return c, nil })
}
