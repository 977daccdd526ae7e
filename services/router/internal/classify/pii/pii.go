// Package pii is the classifier of personal data in the prompt: it reads
// the text the client sent (every message's content, reasoning and tool
// calls, the tools and documents of a chat request; every prompt of a
// completions request) and tags the request pii-detected, the tag the
// example policy pii-stays-local keeps in the cluster on, and pii:<kind>
// for each kind it found:
//
//   - pii:email — local@domain.tld, an alphabetic top-level label;
//   - pii:phone — international numbers (+, country code, 8 to 15 digits:
//     E.164, spaces or dashes allowed: +81 90 1234 5678), and national
//     ones in Japan's formats (03-1234-5678, 090-1234-5678, 0120-123-456,
//     (03) 1234-5678, 09012345678), France's (01 23 45 67 89), Germany's
//     (030 12345678) and the US's (212-555-0123, (212) 555-0123);
//   - pii:card — 13 to 19 digits starting 2–6, whole or in groups of
//     three or more joined by spaces or dashes, passing Luhn's check;
//   - pii:mynumber — Japan's individual number: 12 digits (whole or
//     4-4-4) with its check digit (weights 6,5,4,3,2,7,6,5,4,3,2 over the
//     first eleven, r = sum mod 11, check 0 when r <= 1, else 11 - r);
//   - pii:ssn — a US social security number, AAA-GG-SSSS, without the
//     numbers never issued (area 000, 666, 9xx; group 00; serial 0000);
//   - pii:iban — a registered country's length, whole or in groups of
//     four, passing the mod-97 check;
//   - pii:ip — IPv4 dotted quads and IPv6 addresses (as net/netip reads
//     them).
//
// A value must stand on its own: not inside a word or an identifier
// (INV-2024-4111…, v1.2.3.4-beta, a UUID), a time or a longer run of
// digits. Digits in other scripts (full-width ０３) are not read. The
// tags say which kinds matched, never the text: nothing the classifier
// returns, logs or counts holds personal data.
//
// Accuracy on the labelled corpus in testdata (synthetic, in English,
// Japanese, German and French, with near-misses: order and invoice
// numbers, dates, timestamps, versions, UUIDs, numbers failing the check
// digits) is in ACCURACY.md; TestCorpus fails below 0.95 recall and 0.95
// precision for the check-digit kinds (card, mynumber, iban).
//
// Cost: one pass over the text, linear in it, without allocation
// (hand-written scanners: no regular expression, no backtracking; 1 MB
// prompts of near-misses built against them take 1 to 30 ms of CPU on a
// loaded 2-core machine, BenchmarkHostile). The text comes from the body
// the router already parsed to read the prompt (package chattext). Every value has a
// digit, an '@' or a ':' in its first three bytes, so the pass searches
// for those eight bytes at a time and runs the checks only around them:
// prose passes at the speed of that search (32 KB in about 15 µs of CPU
// on a loaded 2-core machine, against about 90 µs for a table look-up a
// byte; BenchmarkScanProse), text dense with numbers (BenchmarkClassify's
// prompt, a run of digits every 15 bytes or so) gains less. The
// classifier runs only when some rule of the request's program reads a
// tag it gives (pii-detected or pii:…, in a match or a filter's
// condition): otherwise it returns at once, so it costs nothing on a
// router whose policies do not ask.
//
// The classifier cannot fail: a body it cannot read (token ids, no text)
// gets no tags, and it never returns an error. It reads no more than the
// router's prompt limits let through.
package pii

import (
	"context"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
)

// Name is the classifier's name in --classifiers.
const Name = "pii"

// Tag is the umbrella tag: the prompt holds personal data of some kind.
const Tag = policy.TagPII

// TagPrefix starts each kind's tag (pii:card).
const TagPrefix = policy.TagPIIPrefix

var kindTags = func() (t [numKinds]string) {
	for k := range numKinds {
		t[k] = TagPrefix + k.String()
	}
	return t
}()

// Classifier implements classify.Classifier.
type Classifier struct{}

var _ classify.Classifier = Classifier{}

// New is the classifier's factory.
func New() (classify.Classifier, error) { return Classifier{}, nil }

// readsOurs matches the tags the classifier gives; readsKinds its
// per-kind tags.
func readsOurs(tag string) bool  { return tag == Tag || strings.HasPrefix(tag, TagPrefix) }
func readsKinds(tag string) bool { return strings.HasPrefix(tag, TagPrefix) }

// Classify appends pii-detected and a pii:<kind> tag per kind found, when
// the request's program reads any of them.
func (Classifier) Classify(_ context.Context, req *classify.Request, tags []string) ([]string, error) {
	if !req.Program.ReadsTag(readsOurs) {
		return tags, nil
	}
	if slices.Contains(tags, Tag) && !req.Program.ReadsTag(readsKinds) {
		// Tagged already (by the client or its tenant), and no rule asks
		// which kind: scanning would change nothing.
		return tags, nil
	}
	return AppendTags(tags, ScanBody(req)), nil
}

// ScanBody is the kinds found in the request's prompt text.
func ScanBody(req *classify.Request) Kinds {
	segs, err := req.Text()
	if err != nil {
		return 0
	}
	var found Kinds
	for _, s := range segs {
		if found = Scan(s.Text, found); found == allKinds {
			break
		}
	}
	return found
}

// AppendTags appends the tags of found: pii-detected, then each kind's.
func AppendTags(tags []string, found Kinds) []string {
	if found == 0 {
		return tags
	}
	tags = append(tags, Tag)
	for k := range numKinds {
		if found.Has(k) {
			tags = append(tags, kindTags[k])
		}
	}
	return tags
}
