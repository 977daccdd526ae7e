// Package pick holds the baseline routing strategies the load generator
// applies itself, to send each request straight to a worker: random (what a
// Kubernetes Service does), round-robin, least-queue (load only, from the
// workers' vLLM metrics) and oracle (asks every simulated worker for the
// exact TTFT it would give the request and takes the smallest).
package pick

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

// Target is a worker (or any OpenAI-compatible server).
type Target struct {
	// ID names the target in records.
	ID string
	// URL is the server's base URL, without /v1.
	URL string
}

// Picker chooses the target of each request. Pick gets the request's JSON
// body and returns the target's index and a release function to call when
// the request ends.
type Picker interface {
	Pick(ctx context.Context, body []byte) (int, func(), error)
}

// Options configure New.
type Options struct {
	Seed uint64
	// HTTP is used by least-queue (metrics scrapes) and oracle (estimates).
	HTTP *http.Client
	// Background runs the picker's background work (least-queue's scrape
	// loop) until its context ends; the runner passes its own.
	Background func(func(ctx context.Context))
}

// Strategies are the baseline names New accepts.
var Strategies = []string{results.Random, results.RoundRobin, results.LeastQueue, results.Oracle, results.Direct}

// New builds the named strategy over targets.
func New(name string, targets []Target, o Options) (Picker, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("strategy %s: no targets", name)
	}
	if o.HTTP == nil {
		o.HTTP = http.DefaultClient
	}
	switch name {
	case results.Random:
		return &random{rng: rand.New(rand.NewPCG(o.Seed, 0x5eed)), n: len(targets)}, nil
	case results.RoundRobin:
		return &roundRobin{n: uint64(len(targets))}, nil
	case results.Direct:
		if len(targets) != 1 {
			return nil, fmt.Errorf("strategy direct: want one target, have %d", len(targets))
		}
		return direct{}, nil
	case results.LeastQueue:
		return newLeastQueue(targets, o), nil
	case results.Oracle:
		return newOracle(targets, o), nil
	}
	return nil, fmt.Errorf("unknown strategy %q (want one of %v)", name, Strategies)
}

func noop() {}

type direct struct{}

func (direct) Pick(context.Context, []byte) (int, func(), error) { return 0, noop, nil }

type random struct {
	mu  sync.Mutex
	rng *rand.Rand
	n   int
}

func (r *random) Pick(context.Context, []byte) (int, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rng.IntN(r.n), noop, nil
}

type roundRobin struct {
	next atomic.Uint64
	n    uint64
}

func (r *roundRobin) Pick(context.Context, []byte) (int, func(), error) {
	return int((r.next.Add(1) - 1) % r.n), noop, nil
}

// argmin returns the index of the smallest score, breaking ties at random
// so that equal workers share the load.
func argmin(scores []float64, rng *rand.Rand) int {
	best, ties := -1, 0
	for i, s := range scores {
		switch {
		case best < 0 || s < scores[best]:
			best, ties = i, 1
		case s == scores[best]:
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}
