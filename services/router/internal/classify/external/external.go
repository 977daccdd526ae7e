// Package external is the classifier that asks services outside the
// router: each of the GatewayBackend's spec.classifiers (Presidio, a
// team's own model) is sent the request's prompt text and answers the
// tags it carries.
//
// The protocol is one JSON POST per request and classifier:
//
//	→ {"text": "<the prompt's text, messages joined by newlines>", "model": "...", "tenant": "..."}
//	← 200 {"tags": ["pii-detected", ...]}
//
// Only the tags the classifier's entry lists are kept, so a classifier
// cannot set a tag the operator did not give it. A classifier is asked
// only when some rule of the request's program reads one of its tags (or
// its fail tag): otherwise its answer could change no decision.
//
// It fails closed. A classifier that errors, answers anything but 200
// with that JSON, does not answer within its timeout, or has all its
// maxConcurrency slots busy for that long gives the request its failTag
// instead (by default pii-detected, which the shipped PII guard reads),
// so a guarded request is kept local or refused rather than sent out
// unchecked; switchyard_router_classifier_failures_total counts it by
// classifier and reason. Classify itself never fails a decision.
package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/chattext"
)

// Name is the classifier's name in --classifiers.
const Name = "external"

// maxAnswer bounds a classifier's answer.
const maxAnswer = 64 << 10

// Failures counts the calls that failed closed, by classifier and reason
// (error, status, answer, timeout, busy, unreadable). The router
// registers it with its metrics.
var Failures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "switchyard_router_classifier_failures_total",
	Help: "Requests an external classifier did not classify (error, status, answer, timeout, busy, unreadable): each was given the classifier's failTag.",
}, []string{"classifier", "reason"})

// Classifier implements classify.Classifier.
type Classifier struct {
	client *http.Client
	mu     sync.Mutex
	slots  map[string]chan struct{} // by name, URL and size: a changed entry gets new slots
}

var _ classify.Classifier = (*Classifier)(nil)

// New is the classifier's factory.
func New() (classify.Classifier, error) {
	return &Classifier{client: &http.Client{}, slots: map[string]chan struct{}{}}, nil
}

type question struct {
	Text   string `json:"text"`
	Model  string `json:"model"`
	Tenant string `json:"tenant"`
}

type answer struct {
	Tags []string `json:"tags"`
}

// errFailed carries the metric's reason.
type errFailed struct {
	reason string
	err    error
}

func (e *errFailed) Error() string { return e.reason + ": " + e.err.Error() }

// Classify asks each classifier of the request's program whose tags some
// rule reads.
func (c *Classifier) Classify(ctx context.Context, req *classify.Request, tags []string) ([]string, error) {
	if req.Program == nil || len(req.Program.Classifiers) == 0 {
		return tags, nil
	}
	var text *string
	for i := range req.Program.Classifiers {
		ec := &req.Program.Classifiers[i]
		if !ec.Reads(req.Program) {
			continue
		}
		if text == nil {
			t, err := promptText(req)
			if err != nil {
				t = ""
			}
			text = &t
		}
		var got []string
		var err error
		if *text == "" {
			err = &errFailed{"unreadable", chattext.ErrUnreadable}
		} else {
			got, err = c.ask(ctx, ec, question{Text: *text, Model: req.Model, Tenant: req.Tenant})
		}
		if err != nil {
			if ctx.Err() != nil {
				return tags, nil // the caller is gone: no decision is made
			}
			reason := "error"
			var f *errFailed
			if errors.As(err, &f) {
				reason = f.reason
			}
			Failures.WithLabelValues(ec.Name, reason).Inc()
			tags = append(tags, ec.FailTag)
			continue
		}
		for _, t := range got {
			if slices.Contains(ec.Tags, t) {
				tags = append(tags, t)
			}
		}
	}
	return tags, nil
}

// promptText is the request's prompt as one text, its segments joined.
func promptText(req *classify.Request) (string, error) {
	segs, err := req.Text()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, s := range segs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(s.Text)
	}
	return b.String(), nil
}

// ask calls one classifier within its timeout, in one of its slots.
func (c *Classifier) ask(ctx context.Context, ec *policy.ExternalClassifier, q question) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, ec.Timeout)
	defer cancel()
	slots := c.slotsFor(ec)
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-ctx.Done():
		return nil, &errFailed{"busy", fmt.Errorf("%d calls in flight for %s", ec.MaxConcurrency, ec.Timeout)}
	}
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, ec.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &errFailed{"timeout", err}
		}
		return nil, &errFailed{"error", err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &errFailed{"status", fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, &errFailed{"timeout", err}
		}
		return nil, &errFailed{"error", err}
	}
	var a answer
	if len(raw) > maxAnswer || json.Unmarshal(raw, &a) != nil || a.Tags == nil {
		return nil, &errFailed{"answer", errors.New(`want {"tags": [...]}`)}
	}
	return a.Tags, nil
}

func (c *Classifier) slotsFor(ec *policy.ExternalClassifier) chan struct{} {
	key := fmt.Sprintf("%s\x00%s\x00%d", ec.Name, ec.URL, ec.MaxConcurrency)
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.slots[key]
	if !ok {
		s = make(chan struct{}, ec.MaxConcurrency)
		c.slots[key] = s
	}
	return s
}
