package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fleet"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// TestPrefixPressureChecks: llm-d's four ratios at the headline, on the
// file's TTFT basis, each only when the strategy it compares with ran.
func TestPrefixPressureChecks(t *testing.T) {
	sum := func(p90, tokens float64) *results.Summary {
		s := &results.Summary{Rate: 0.5}
		s.TTFTP90, s.ProjectedTTFTP90 = results.Num(p90), results.Num(p90/2)
		s.OutputTokensPerS = results.Num(tokens)
		return s
	}
	file := func(sy, rnd, apx, orc *results.Summary) *results.File {
		m := map[string]*results.Summary{results.Switchyard: sy}
		for name, s := range map[string]*results.Summary{results.Random: rnd, results.Approximate: apx, results.Oracle: orc} {
			if s != nil {
				m[name] = s
			}
		}
		return &results.File{Workloads: map[string]map[string]*results.Summary{string(workload.PrefixPressure): m}}
	}
	all := []string{metricPressureVsRandom, metricPressureVsApprox, metricPressureTokens, metricPressureGapOracle}
	for _, tc := range []struct {
		name              string
		sy, rnd, apx, orc *results.Summary
		projected         bool
		want              map[string]bool
	}{
		// llm-d's own figures: 93 / 0.54 = 172×, 31 / 0.54 = 57.4×,
		// 8,730 / 6,944 = 1.257×.
		{"llm-d's figures", sum(0.54, 8730), sum(93, 6000), sum(31, 6944), sum(0.5, 8800), false,
			map[string]bool{metricPressureVsRandom: true, metricPressureVsApprox: true, metricPressureTokens: true, metricPressureGapOracle: true}},
		{"no collapse to beat", sum(2, 900), sum(20, 700), sum(6, 850), sum(1.5, 950), false,
			map[string]bool{metricPressureVsRandom: false, metricPressureVsApprox: false, metricPressureTokens: false, metricPressureGapOracle: false}},
		// 1.1 / 1 is +10 %; 1.2 / 1 is +20 %.
		{"the oracle's gap", sum(1.1, 9000), sum(200, 7000), sum(70, 7000), sum(1, 9000), false,
			map[string]bool{metricPressureVsRandom: true, metricPressureVsApprox: true, metricPressureTokens: true, metricPressureGapOracle: true}},
		{"too far from the oracle", sum(1.2, 9000), sum(210, 7000), sum(70, 7000), sum(1, 9000), false,
			map[string]bool{metricPressureVsRandom: true, metricPressureVsApprox: true, metricPressureTokens: true, metricPressureGapOracle: false}},
		{"approximate alone", sum(1, 9000), nil, sum(60, 7000), nil, false,
			map[string]bool{metricPressureVsApprox: true, metricPressureTokens: true}},
		// Projected p90s are half the client's: the ratios are the same,
		// the basis is the projected one (checked through Got below).
		{"projected basis", sum(0.54, 8730), sum(93, 6000), sum(31, 6944), sum(0.5, 8800), true,
			map[string]bool{metricPressureVsRandom: true, metricPressureVsApprox: true, metricPressureTokens: true, metricPressureGapOracle: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PrefixPressureChecks(file(tc.sy, tc.rnd, tc.apx, tc.orc), tc.projected)
			if len(got) != len(tc.want) {
				t.Fatalf("%d checks %+v, want %d", len(got), got, len(tc.want))
			}
			for _, c := range got {
				want, ok := tc.want[c.Metric]
				if !ok || c.Pass != want || c.Workload != string(workload.PrefixPressure) || c.Rate != 0.5 || c.Note == "" {
					t.Errorf("%s: got %v pass %v (rate %v, note %q), want pass %v", c.Metric, c.Got, c.Pass, c.Rate, c.Note, want)
				}
				if c.Metric == metricPressureVsRandom && tc.rnd != nil {
					rnd, sy := tc.rnd.TTFTP90, tc.sy.TTFTP90
					if tc.projected {
						rnd, sy = tc.rnd.ProjectedTTFTP90, tc.sy.ProjectedTTFTP90
					}
					if c.Got != rnd/sy {
						t.Errorf("vs random %v, want %v", c.Got, rnd/sy)
					}
				}
			}
			if !slices.ContainsFunc(all, func(m string) bool { _, ok := tc.want[m]; return ok }) {
				t.Fatal("case checks nothing")
			}
		})
	}
	if got := PrefixPressureChecks(file(nil, sum(1, 1), nil, nil), false); got != nil {
		t.Errorf("checks without switchyard: %+v", got)
	}
	// Bar carries them with the other references.
	bar := Bar(file(sum(0.54, 8730), sum(93, 6000), sum(31, 6944), sum(0.5, 8800)))
	if n := len(slices.DeleteFunc(bar, func(c results.Check) bool { return c.Workload != string(workload.PrefixPressure) })); n != 4 {
		t.Errorf("bar has %d prefix-pressure checks, want 4", n)
	}
}

func TestPrefixPressureFlags(t *testing.T) {
	c, err := parseFlags()
	if err != nil {
		t.Fatal(err)
	}
	// The routing benchmark's defaults stay as they were.
	if slices.Contains(c.Workloads, workload.PrefixPressure) || slices.Contains(c.Strategies, results.Approximate) {
		t.Errorf("defaults %v %v: prefix-pressure and approximate are on request", c.Workloads, c.Strategies)
	}
	// The KV capacity is measured by Run: neither groups nor capacity is
	// needed to validate.
	c, err = parseFlags("--workloads", "prefix-pressure", "--strategies", "random,approximate,switchyard,oracle", "--kv-events",
		"--load", "rate", "--rates", "0.2")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("prefix-pressure with approximate: %v", err)
	}
	if c.SLO[workload.PrefixPressure] <= 0 || !slices.Equal(c.Strategies, []string{results.Random, results.Approximate, results.Switchyard, results.Oracle}) {
		t.Errorf("slo %v strategies %v", c.SLO, c.Strategies)
	}
	if _, err := parseFlags("--pressure-question-tokens", "0"); err == nil {
		t.Error("--pressure-question-tokens 0 accepted")
	}
	c, _ = parseFlags("--workloads", "prefix-pressure", "--pressure-kv-fill", "1.5", "--pressure-users", "0", "--pressure-prefix-tokens", "0")
	err = c.Validate()
	for _, want := range []string{"pressure-kv-fill 1.5", "pressure-users 0", "prefix-pressure: pressure-prefix-tokens 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := parseFlags("--strategies", "approx"); err == nil || !strings.Contains(err.Error(), "approximate") {
		t.Errorf("unknown strategy: %v, want the list naming approximate", err)
	}
}

// TestComparePrefixPressure runs prefix-pressure at a tiny scale under
// random, approximate, switchyard with KV events and the oracle: the groups
// come from the KV cache the simulated worker reports, approximate routes
// through the real router with no KV events, on its approximate index, and
// the bar carries llm-d's checks at the rate.
func TestComparePrefixPressure(t *testing.T) {
	cfg := fleetConfig(t)
	cfg.Workloads = []workload.Kind{workload.PrefixPressure}
	cfg.Strategies = []string{results.Random, results.Approximate, results.Switchyard, results.Oracle}
	cfg.Load, cfg.Rates, cfg.Requests = LoadRate, []float64{1}, 10
	// A sliver of the KV cache, so that 10 requests revisit groups.
	cfg.Spec.PressureKVFill, cfg.Spec.PressurePrefixTokens = 0.01, 300
	cfg.Spec.PressureQuestionTokens, cfg.Spec.PressureOutputTokens = workload.Const(60), workload.Const(4)
	approxCached := -1
	cfg.onGateway = func(ctx context.Context, strat string, spec workload.Spec, gw *fleet.Gateway) error {
		if strat != results.Approximate {
			return nil
		}
		// After the speculative entries (the predicted TTFT plus 2 s of
		// wall time) have expired, with no KV events, only the
		// approximate index can know where a group's prefix went.
		time.Sleep(3 * time.Second)
		gen, err := workload.NewGenerator(spec)
		if err != nil {
			return err
		}
		s := gen.Next()
		s.Turns[0].User = "a question nobody asked"
		body, _ := json.Marshal(map[string]any{"model": cfg.Model, "messages": s.Messages(0, nil)})
		approxCached, err = explainCached(ctx, gw.RouterURL(), body)
		return err
	}
	f, _ := runFleets(t, cfg, 3*time.Minute)
	shape := f.Params.Workloads[string(workload.PrefixPressure)]
	if kv := shape.PressureKVTokens; kv <= 0 || kv%cfg.Workers != 0 || shape.PressureGroups != workload.GroupsForKV(kv, 0.01, 300) || shape.PressureGroups < 2 {
		t.Errorf("shape %+v: want groups derived from a measured KV cache", shape)
	}
	for _, strat := range cfg.Strategies {
		s := f.Workloads[string(workload.PrefixPressure)][strat]
		if s == nil || s.Succeeded != 10 || !s.TTFTP90.Valid() || !s.ProjectedTTFTP90.Valid() || !(s.OutputTokensPerS > 0) {
			t.Fatalf("%s: %+v", strat, s)
		}
	}
	// The router's own score of its predictions, read from its metrics,
	// for the strategies that go through it, and only for them.
	for _, strat := range cfg.Strategies {
		s := f.Workloads[string(workload.PrefixPressure)][strat]
		viaRouter := strat == results.Switchyard || strat == results.Approximate
		if got := s.PredictorRouterMAPE.Valid() && s.PredictorRouterSamples > 0; got != viaRouter {
			t.Errorf("%s: router-scored MAPE %v over %d samples; want one: %v", strat, s.PredictorRouterMAPE, s.PredictorRouterSamples, viaRouter)
		}
		if viaRouter && !(s.PredictorRouterMAPE >= 0 && s.PredictorRouterSamples <= s.Succeeded) {
			t.Errorf("%s: router-scored MAPE %v over %d samples of %d requests", strat, s.PredictorRouterMAPE, s.PredictorRouterSamples, s.Succeeded)
		}
	}
	if a := f.Workloads[string(workload.PrefixPressure)][results.Approximate]; !(a.CacheHitRatio > 0) {
		t.Errorf("approximate: cache hit %v, want some of the groups' prefixes found", a.CacheHitRatio)
	}
	if approxCached <= 0 {
		t.Errorf("approximate's router predicts %d cached tokens for a routed group's prefix after its speculative entries expired: want its approximate index's", approxCached)
	}
	var metrics []string
	for _, c := range f.Bar {
		if c.Workload == string(workload.PrefixPressure) && c.Rate == 1 {
			metrics = append(metrics, c.Metric)
		}
	}
	if len(metrics) != 4 {
		t.Errorf("bar %+v: want llm-d's four checks at rate 1", f.Bar)
	}
}

// explainCached asks the router at url to explain body and returns the most
// prompt tokens any candidate caches.
func explainCached(ctx context.Context, url string, body []byte) (int, error) {
	if url == "" {
		return 0, fmt.Errorf("no router URL in the banner")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/route:explain", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("explain: %s: %s", resp.Status, b)
	}
	var out struct {
		Candidates []map[string]any `json:"candidates"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, fmt.Errorf("explain: %w: %s", err, b)
	}
	best := 0
	for _, c := range out.Candidates {
		for _, key := range []string{"cached_tokens", "cachedTokens"} {
			switch v := c[key].(type) {
			case string: // protojson's int64
				n, _ := strconv.Atoi(v)
				best = max(best, n)
			case float64:
				best = max(best, int(v))
			}
		}
	}
	if len(out.Candidates) == 0 {
		return 0, fmt.Errorf("explain: no candidates: %s", b)
	}
	return best, nil
}
