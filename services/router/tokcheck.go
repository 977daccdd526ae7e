package router

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/tokcheck"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
)

// tokChecker knows when the router's tokenizer for a model is wrong
// (internal/tokcheck). Whenever a local worker appears for a model the
// router has a tokenizer for, it probes the worker's POST /tokenize with
// the fixed probe, one worker at a time; a worker whose ids differ puts
// its model into approximate routing (prompt text, as for a model without
// tokenizer) for as long as it serves it. A worker that restarts (a new
// process start time on its metrics) is probed again at once. A worker without /tokenize or
// unreachable is "unchecked" (no verdict), retried from --tokenizer-check-retry,
// doubling up to --tokenizer-check-interval, which also spaces the
// rechecks of checked workers: a worker sees at most two small requests
// per interval. Readiness does not depend on any of it.
//
// It also compares, for the requests this replica routed with token ids,
// its prompt count with the worker's (usage.prompt_tokens, from the
// gateway's completion report over NATS), as the load table hears each
// completion (Table.OnPromptCount; the table's in-flight entry holds the
// router's count): a difference beyond the template's generation prompt
// is counted and warned about, at most once a minute per model.
type tokChecker struct {
	enabled  bool
	interval time.Duration
	retry    time.Duration
	timeout  time.Duration
	toks     tokenizers
	table    *load.Table
	m        *metrics
	log      zerolog.Logger
	client   *http.Client

	mu     sync.Mutex
	state  map[checkKey]*checkState
	counts map[string]int64 // prompt-count mismatches per model

	// approx holds the models routed approximately because a worker's
	// tokenizer differs; read on every Route, replaced on change.
	approx atomic.Pointer[map[string]bool]

	countMu  sync.Mutex
	slack    map[string]int // model → generation prompt tokens
	lastWarn map[string]time.Time
}

type checkKey struct{ endpoint, model string }

type checkState struct {
	url     string
	res     tokcheck.Result
	detail  string
	checked time.Time // last verdict or attempt; zero before the first
	next    time.Time
	backoff time.Duration
}

// countWarnEvery rate-limits the prompt-count warning per model.
const countWarnEvery = time.Minute

func newTokChecker(cfg Config, toks tokenizers, table *load.Table, m *metrics, log zerolog.Logger) *tokChecker {
	c := &tokChecker{
		enabled: cfg.TokenizerCheck, interval: cfg.TokenizerCheckInterval, retry: cfg.TokenizerCheckRetry, timeout: cfg.TokenizerCheckTimeout,
		toks: toks, table: table, m: m, log: log.With().Str("part", "tokcheck").Logger(),
		client: &http.Client{Timeout: cfg.TokenizerCheckTimeout},
		state:  map[checkKey]*checkState{}, counts: map[string]int64{},
		slack: map[string]int{}, lastWarn: map[string]time.Time{},
	}
	empty := map[string]bool{}
	c.approx.Store(&empty)
	table.OnPromptCount(c.promptCount)
	return c
}

// approximate reports whether model's prompts are read as text because a
// worker's tokenizer differs from the router's.
func (c *tokChecker) approximate(model string) bool {
	return (*c.approx.Load())[model]
}

// run checks the workers as they appear until ctx ends.
func (c *tokChecker) run(ctx context.Context) {
	if !c.enabled {
		return
	}
	tick := time.NewTicker(min(time.Second, c.retry))
	defer tick.Stop()
	for {
		c.round(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round syncs the state with the table's workers and checks the ones due,
// one at a time.
func (c *tokChecker) round(ctx context.Context, now time.Time) {
	present := map[checkKey]string{}
	for _, v := range c.table.Endpoints("") {
		if v.Kind == endpoints.KindProvider || v.URL == "" {
			continue
		}
		for _, model := range v.Models {
			if c.toks.For(model) != nil {
				present[checkKey{v.ID, model}] = v.URL
			}
		}
	}
	c.mu.Lock()
	for k, url := range present {
		if st, ok := c.state[k]; !ok || st.url != url {
			c.state[k] = &checkState{url: url, next: now, backoff: c.retry, res: tokcheck.Result{Status: tokcheck.Unchecked, Position: -1}, detail: "not checked yet"}
		}
	}
	for k := range c.state {
		if _, ok := present[k]; !ok {
			delete(c.state, k)
		}
	}
	var due []checkKey
	for k, st := range c.state {
		if !now.Before(st.next) {
			due = append(due, k)
		}
	}
	c.mu.Unlock()
	changed := false
	sort.Slice(due, func(i, j int) bool {
		return due[i].endpoint < due[j].endpoint || (due[i].endpoint == due[j].endpoint && due[i].model < due[j].model)
	})
	for _, k := range due {
		if ctx.Err() != nil {
			return
		}
		c.mu.Lock()
		st := c.state[k]
		var url string
		if st != nil {
			url = st.url
		}
		c.mu.Unlock()
		if st == nil {
			continue
		}
		tok := c.toks.For(k.model)
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		res := tokcheck.Check(cctx, c.client, url, k.model, tok)
		cancel()
		if ctx.Err() != nil {
			return
		}
		changed = c.record(k, url, res, tok, time.Now()) || changed
	}
	c.publish(changed)
}

// record keeps a check's result; it reports whether the verdict changed.
func (c *tokChecker) record(k checkKey, url string, res tokcheck.Result, tok tokenizer.Tokenizer, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state[k]
	if st == nil || st.url != url {
		return false
	}
	prev, tried := st.res.Status, !st.checked.IsZero()
	st.res, st.detail, st.checked = res, res.Describe(tok), now
	c.m.tokenizerChecks.WithLabelValues(k.model, string(res.Status)).Inc()
	switch res.Status {
	case tokcheck.Unchecked:
		// Jittered so that a fleet's workers are not probed in step.
		wait := st.backoff/2 + rand.N(st.backoff/2+1)
		st.next = now.Add(wait)
		st.backoff = min(2*st.backoff, c.interval)
		ev := c.log.Info()
		if prev == tokcheck.Unchecked && tried {
			ev = c.log.Debug()
		}
		ev.Str("model", k.model).Str("endpoint", k.endpoint).Err(res.Err).Dur("retry_in", wait).
			Msg("tokenizer not checked against the worker (no /tokenize, or unreachable): retrying later")
	case tokcheck.Mismatch:
		st.next, st.backoff = now.Add(c.interval), c.retry
		c.log.Warn().Str("model", k.model).Str("endpoint", k.endpoint).Str("form", res.Form).Int("first_difference", res.Position).
			Str("detail", st.detail).
			Msg("the router's tokenizer for this model differs from the worker's: routing the model in approximate mode (prompt text) until they agree; fix --tokenizers")
	case tokcheck.Match:
		st.next, st.backoff = now.Add(c.interval), c.retry
		if prev != tokcheck.Match {
			c.log.Info().Str("model", k.model).Str("endpoint", k.endpoint).Msg("tokenizer matches the worker's")
		}
	}
	return prev != res.Status
}

// recheck makes endpoint's checks due now: it restarted, perhaps as
// another build with another tokenizer.
func (c *tokChecker) recheck(endpoint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.state {
		if k.endpoint == endpoint {
			st.next, st.backoff = time.Time{}, c.retry
		}
	}
}

// publish recomputes the approximate models and the mismatch gauges.
func (c *tokChecker) publish(changed bool) {
	c.mu.Lock()
	set := map[string]bool{}
	models := map[string]bool{}
	for k, st := range c.state {
		models[k.model] = true
		if st.res.Status == tokcheck.Mismatch {
			set[k.model] = true
		}
	}
	c.mu.Unlock()
	for m := range models {
		v := 0.0
		if set[m] {
			v = 1
		}
		c.m.tokenizerMismatch.WithLabelValues(m).Set(v)
	}
	old := *c.approx.Load()
	if changed || len(old) != len(set) {
		c.approx.Store(&set)
	}
	for m := range old {
		if !models[m] {
			c.m.tokenizerMismatch.DeleteLabelValues(m)
		}
	}
}

// status is Explain's account of model.
func (c *tokChecker) status(model string) *routerv1.TokenizerStatus {
	ts := &routerv1.TokenizerStatus{Model: model}
	tok := c.toks.For(model)
	c.mu.Lock()
	ts.PromptCountMismatches = c.counts[model]
	var keys []checkKey
	for k := range c.state {
		if k.model == model {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b checkKey) int {
		if a.endpoint < b.endpoint {
			return -1
		}
		if a.endpoint > b.endpoint {
			return 1
		}
		return 0
	})
	for _, k := range keys {
		st := c.state[k]
		ck := &routerv1.TokenizerCheck{EndpointId: k.endpoint, Status: string(st.res.Status), FirstDifference: int64(st.res.Position), Detail: st.detail}
		if !st.checked.IsZero() {
			ck.CheckedAt = timestamppb.New(st.checked)
		}
		ts.Checks = append(ts.Checks, ck)
	}
	c.mu.Unlock()
	switch {
	case tok == nil:
		ts.Mode, ts.Reason = "approximate", "no tokenizer configured for the model (--tokenizers)"
	case c.approximate(model):
		ts.Mode, ts.Reason = "approximate", "a worker's tokenizer differs from the router's (see checks)"
	case !c.enabled:
		ts.Mode, ts.Reason = "precise", "tokenizer checks are off (--tokenizer-check=false)"
	default:
		ts.Mode, ts.Reason = "precise", "token ids from the router's tokenizer"
	}
	return ts
}

// promptCount compares the router's prompt count of a request it routed
// with the worker's (Table.OnPromptCount: under the table's lock, so it
// only counts, and warns at most once a minute per model).
func (c *tokChecker) promptCount(model string, routed, worker int64) {
	c.countMu.Lock()
	slack, known := c.slack[model]
	if !known {
		// Once per model: the generation prompt's tokens, which a
		// worker's count may include and the router's not, or the
		// reverse.
		if tok := c.toks.For(model); tok != nil {
			slack = tokcheck.GenerationPromptTokens(context.Background(), tok)
		}
		c.slack[model] = slack
	}
	diff := routed - worker
	if diff < 0 {
		diff = -diff
	}
	if diff <= int64(slack) {
		c.countMu.Unlock()
		return
	}
	now := time.Now()
	warn := now.Sub(c.lastWarn[model]) >= countWarnEvery
	if warn {
		c.lastWarn[model] = now
	}
	c.countMu.Unlock()
	c.m.promptCountMismatch.WithLabelValues(model).Inc()
	c.mu.Lock()
	c.counts[model]++
	n := c.counts[model]
	c.mu.Unlock()
	if warn {
		c.log.Warn().Str("model", model).Int64("router_prompt_tokens", routed).
			Int64("worker_prompt_tokens", worker).Int("slack", slack).Int64("mismatches", n).
			Msg("the worker counted a different number of prompt tokens than the router: the router's tokenizer or chat template for this model is likely wrong (at most one warning a minute per model; switchyard_router_prompt_token_count_mismatch_total counts them all)")
	}
}
