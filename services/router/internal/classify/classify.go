// Package classify is the router's classifier seam: what a request is, in
// the tags policies match on. A rule applies to requests carrying a tag
// (matches.tag), an exclude filter only when one is carried (if.tag): a
// request tagged pii-detected never leaves the cluster, one from a tenant
// tagged batch may go to the cheapest provider.
//
// Before each decision the router runs the classifiers its configuration
// names (--classifiers), in order, over the request and its prompt; the
// decision sees every tag they return, each once, in the order first
// returned. Each implementation is a package of its own below this one,
// registered by name in the router:
//
//   - header-tags: the tags the client sent in the GatewayBackend's tags
//     header, those its allowedTags list permits;
//   - tenant-tags: the tags the GatewayBackend gives the request's tenant;
//   - pii: pii-detected and pii:<kind> when the prompt's text holds
//     personal data (e-mail, phone, card, My Number, SSN, IBAN, IP);
//   - pii-rules: pii-detected and pii:<kind> for the GatewayBackend's own
//     kinds of personal data (spec.pii: patterns and dictionaries);
//   - complexity: complexity-low or complexity-high, from a cheap score
//     of the prompt's text.
//
// pii, pii-rules and complexity read the body only when some rule of the request's
// program reads a tag they give (policy.Program.ReadsTag), so they are on
// by default at no cost to a router whose policies do not ask. None of
// the built-ins can fail: an unreadable prompt gets no tags, not an error.
//
// Classify runs on every Route: it must not block on I/O without honouring
// ctx, and should append to tags rather than allocate.
package classify

import (
	"context"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/chattext"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
)

// Classifier says which tags a request carries.
type Classifier interface {
	// Classify appends req's tags to tags and returns the result. An error
	// fails the request's decision (a classifier that may fail open
	// returns no tags and no error instead).
	Classify(ctx context.Context, req *Request, tags []string) ([]string, error)
}

// Factory builds a classifier; the router registers one per name.
type Factory func() (Classifier, error)

// Request is one request as classifiers see it. It is shared by the
// classifiers of a decision and reused after it: read it, keep nothing.
type Request struct {
	Tenant string
	// Model is the model the client asked for (possibly an alias).
	Model string
	// HeaderTags are the tags the client sent in the tags header, as the
	// gateway read them; a request carries none of them unless a
	// classifier (header-tags) says so.
	HeaderTags []string
	// Program is the GatewayBackend's routing the decision runs
	// (policy.DefaultProgram without one): its tag settings.
	Program *policy.Program
	// API and Body are the client's request as the gateway received it.
	API  routerv1.ApiKind
	Body []byte
	// Prompt is the prompt as the router read it for the cache lookup:
	// the model's token ids, or its text when the model has no tokenizer.
	Prompt prompt.Prompt

	// The prompt's text, read from Body by the first classifier that asks
	// (Text) and kept for the others of the decision.
	segs     []chattext.Segment
	segsErr  error
	segsRead bool
}

// Text is the prompt's text segments, read once per decision however
// many classifiers ask: from the request the router parsed to read the
// prompt, or from Body when it has none. The segments are the request's:
// read them, keep nothing.
func (r *Request) Text() ([]chattext.Segment, error) {
	if !r.segsRead {
		switch {
		case r.Prompt.Chat != nil:
			r.segs, r.segsErr = chattext.FromChat(r.Prompt.Chat, r.segs[:0]), nil
		case r.Prompt.Completion != nil:
			r.segs, r.segsErr = chattext.FromCompletion(r.Prompt.Completion, r.segs[:0])
		default:
			r.segs, r.segsErr = chattext.Segments(r.API, r.Body, r.segs[:0])
		}
		r.segsRead = true
	}
	return r.segs, r.segsErr
}

// Reset readies r for another decision: every field zero but the text
// buffer's capacity, which holds no text of the last one.
func (r *Request) Reset() {
	buf := r.segs[:cap(r.segs)]
	clear(buf)
	*r = Request{segs: buf[:0]}
}
