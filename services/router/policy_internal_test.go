package router

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
)

// TestDefaultProgramTakesTheLowestScore: without policies every decision
// is the default program's, and it takes the lowest score (predicted TTFT
// plus the recompute and pressure charges), to within the near-tie
// tolerance, on a warm fleet where cache overlap decides; Explain, the
// same call traced, answers what Route then does.
func TestDefaultProgramTakesTheLowestScore(t *testing.T) {
	s, body := benchService(t)
	ctx := context.Background()
	bodies := [][]byte{body, []byte(`{"model":"m","messages":[{"role":"user","content":"unrelated"}]}`), nil}
	for i := range 60 {
		req := &routerv1.RouteRequest{RequestId: "r" + strconv.Itoa(i), Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, Body: bodies[i%len(bodies)]}
		now := time.Now()
		d := s.getDecision()
		if err := s.decide(ctx, d, req, now, true); err != nil {
			t.Fatal(err)
		}
		ex := s.explanation(d) // Explain, at the same time as the Route below
		s.putDecision(d)
		best := ex.GetCandidates()[0].GetScore()
		for _, c := range ex.GetCandidates() {
			best = min(best, c.GetScore())
		}
		var chosen *routerv1.Candidate
		for _, c := range ex.GetCandidates() {
			if c.GetChosen() {
				chosen = c
			}
		}
		if chosen == nil || chosen.GetScore() > best+max(1e-3, 0.01*best) {
			t.Fatalf("%d: chose %v, lowest score %v", i, chosen, best)
		}
		resp, err := s.route(ctx, req, now)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(resp, ex.GetResult()) {
			t.Fatalf("%d: Route answered %v\nExplain said %v", i, resp, ex.GetResult())
		}
		if d := resp.GetDecision(); d.GetStrategy() != load.Strategy || d.GetPolicy() != "" || !strings.HasPrefix(d.GetReason(), "predicted TTFT ") {
			t.Fatalf("%d: decision %v", i, d)
		}
	}
}

// tagger is a classifier for tests: it returns its tags, or fails.
type tagger struct {
	tags []string
	err  error
}

func (c tagger) Classify(_ context.Context, _ *classify.Request, tags []string) ([]string, error) {
	return append(tags, c.tags...), c.err
}

// TestClassifiersMakeTheTags: the decision carries every tag the
// classifiers return, each once, in the order first returned; a
// classifier's error fails the decision with its name.
func TestClassifiersMakeTheTags(t *testing.T) {
	s, _ := benchService(t)
	req := &routerv1.RouteRequest{RequestId: "r", Tenant: "team-a", Model: "m", Tags: []string{"header", "again"}}
	s.classifiers = append(s.classifiers,
		classifier{name: "a", Classifier: tagger{tags: []string{"x", "header", "x"}}},
		classifier{name: "b", Classifier: tagger{tags: []string{"y", "again"}}})
	d := s.getDecision()
	if err := s.decide(context.Background(), d, req, time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if want := []string{"header", "again", "x", "y"}; !slices.Equal(d.preq.Tags, want) {
		t.Fatalf("tags %v, want %v", d.preq.Tags, want)
	}
	s.putDecision(d)

	boom := errors.New("no answer")
	s.classifiers = append(s.classifiers, classifier{name: "external", Classifier: tagger{err: boom}})
	_, err := s.Route(context.Background(), req)
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "classifier external: no answer") {
		t.Fatalf("Route with a failing classifier: %v", err)
	}
	if _, err := s.Explain(context.Background(), req); status.Code(err) != codes.Internal {
		t.Fatalf("Explain with a failing classifier: %v", err)
	}
}
