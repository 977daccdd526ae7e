package results

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
)

func rec(startWall, ttftWall, e2eWall float64, gaps ...float64) Record {
	return Record{
		StartWallS: startWall, EndWallS: startWall + e2eWall,
		WallTTFTS: Num(ttftWall), WallE2ES: Num(e2eWall), Gaps: gaps, SimTTFTS: NaN, ProjectedTTFTS: NaN,
		PromptTokens: 100, CachedTokens: 25, CompletionTokens: len(gaps) + 1,
	}
}

func near(a Num, b float64) bool { return math.Abs(float64(a)-b) < 1e-9 }

func TestSummarize(t *testing.T) {
	// Wall seconds at time scale 10: TTFTs 0.1, 0.2, 0.9 wall = 1, 2, 9
	// model seconds; the run spans 0 → 6 wall = 60 model seconds.
	recs := []Record{
		rec(0, 0.1, 1, 0.01, 0.03),
		rec(1, 0.2, 2, 0.02),
		rec(2, 0.9, 4),
		{StartWallS: 3, EndWallS: 3.1, Error: "status 429: busy", Shed: true},
		{StartWallS: 4, EndWallS: 4.1, Error: "status 400: bad"},
	}
	s := Summarize(recs, 10, 5)
	checks := []struct {
		name string
		got  Num
		want float64
	}{
		{"ttft p50", s.TTFTP50, 2},
		{"ttft p95 (interpolated)", s.TTFTP95, 2 + 0.9*7},
		{"wall ttft p50", s.Wall.TTFTP50, 0.2},
		{"itl p50", s.ITLP50, 0.2},
		{"e2e p50", s.E2EP50, 20},
		{"shed rate", s.ShedRate, 0.2},
		{"error rate", s.ErrorRate, 0.2},
		{"slo attainment (2 of 5 under 5 s)", s.SLOAttainment, 0.4},
		{"goodput: 2 per model minute", s.GoodputRPM, 2},
		{"duration", s.DurationS, 60},
		{"throughput", s.ThroughputRPS, 3.0 / 60},
		{"cache hit", s.CacheHitRatio, 0.25},
		{"output tokens per second", s.OutputTokensPerS, 6.0 / 60},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.Requests != 5 || s.Succeeded != 3 || s.ShedCount != 1 || s.ErrorCount != 1 {
		t.Errorf("counts %d/%d/%d/%d", s.Requests, s.Succeeded, s.ShedCount, s.ErrorCount)
	}
	if len(s.ErrorSamples) != 2 {
		t.Errorf("error samples %q", s.ErrorSamples)
	}
	if len(s.TTFTQuantiles) != 51 || !near(s.TTFTQuantiles[0], 1) || !near(s.TTFTQuantiles[50], 9) {
		t.Errorf("quantiles %v", s.TTFTQuantiles)
	}
	if s.SimTTFTP50.Valid() {
		t.Error("sim TTFT without simulator timings")
	}
}

func TestSummarizeNothing(t *testing.T) {
	s := Summarize(nil, 1, 1)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("a summary of no requests must still encode: %v", err)
	}
	if !strings.Contains(string(b), `"ttft_p50_s":null`) || !strings.Contains(string(b), `"requests":0`) {
		t.Errorf("encoded %s", b)
	}
}

func TestNumJSON(t *testing.T) {
	for _, tc := range []struct {
		in   Num
		want string
	}{{NaN, "null"}, {Num(math.Inf(1)), "null"}, {1.5, "1.5"}, {1.0 / 3, "0.333333"}, {1234567, "1.23457e+06"}} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%v → %s (%v), want %s", float64(tc.in), b, err, tc.want)
		}
	}
	var n Num
	if err := json.Unmarshal([]byte("null"), &n); err != nil || n.Valid() {
		t.Errorf("null → %v, %v", n, err)
	}
	if err := json.Unmarshal([]byte("2.5"), &n); err != nil || n != 2.5 {
		t.Errorf("2.5 → %v, %v", n, err)
	}
}

// TestStableShape pins the summary keys other tools read.
func TestStableShape(t *testing.T) {
	f := File{Schema: Schema, Workloads: map[string]map[string]*Summary{"shared-prefix": {"random": Summarize([]Record{rec(0, 1, 2)}, 1, 8)}}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	s := back["workloads"].(map[string]any)["shared-prefix"].(map[string]any)["random"].(map[string]any)
	for _, k := range []string{"ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "itl_p50_s", "goodput_rpm", "shed_rate", "requests", "cache_hit_ratio", "time_scale", "slo_ttft_s", "wall"} {
		if _, ok := s[k]; !ok {
			t.Errorf("summary has no %q", k)
		}
	}
}

func TestMedian(t *testing.T) {
	runs := []*Summary{
		Summarize([]Record{rec(0, 0.1, 1)}, 1, 5),
		Summarize([]Record{rec(0, 0.3, 1)}, 1, 5),
		Summarize([]Record{rec(0, 0.2, 1), {StartWallS: 0, EndWallS: 1, Error: "x", Shed: true}}, 1, 5),
	}
	var all []Record
	all = append(all, rec(0, 0.1, 1), rec(0, 0.3, 1), rec(0, 0.2, 1), Record{Error: "x", Shed: true})
	m := Median(runs, Summarize(all, 1, 5))
	if !near(m.TTFTP50, 0.2) || !near(m.Wall.TTFTP50, 0.2) || !near(m.ShedRate, 0) {
		t.Errorf("median ttft %v wall %v shed %v", m.TTFTP50, m.Wall.TTFTP50, m.ShedRate)
	}
	if m.Requests != 4 || m.ShedCount != 1 || len(m.TTFTQuantiles) != 51 {
		t.Errorf("pooled counts %d/%d, %d quantiles", m.Requests, m.ShedCount, len(m.TTFTQuantiles))
	}
	if got := Median(runs[:1], runs[0]); got.TTFTP50 != runs[0].TTFTP50 {
		t.Error("one run is its own median")
	}
}

func TestProject(t *testing.T) {
	for _, tc := range []struct {
		wall, sim Num
		scale     float64
		want      float64
	}{
		// 50 ms on the wall, 40 of them the engine's (0.4 model s at 10×):
		// the other 10 ms count once.
		{0.05, 0.4, 10, 0.41},
		// The engine's clock ran ahead of the wall: never below its TTFT.
		{0.03, 0.4, 10, 0.4},
		{0.05, NaN, 10, math.NaN()},
		{NaN, 0.4, 10, math.NaN()},
	} {
		got := Project(tc.wall, tc.sim, tc.scale)
		if math.IsNaN(tc.want) != !got.Valid() || (got.Valid() && !near(got, tc.want)) {
			t.Errorf("Project(%v, %v, %v) = %v, want %v", tc.wall, tc.sim, tc.scale, got, tc.want)
		}
	}
	withSim := func(wall, sim float64) Record {
		r := rec(0, wall, 1)
		r.SimTTFTS, r.ProjectedTTFTS = Num(sim), Project(Num(wall), Num(sim), 10)
		return r
	}
	s := Summarize([]Record{withSim(0.05, 0.4), withSim(0.11, 1), withSim(0.2, 1.9)}, 10, 5)
	if !near(s.ProjectedTTFTP50, 1.01) {
		t.Errorf("projected p50 %v, want 1.01", s.ProjectedTTFTP50)
	}
	// One request without a simulator timing: no projected figure for the
	// run rather than one over part of it.
	s = Summarize([]Record{withSim(0.05, 0.4), rec(1, 0.1, 1)}, 10, 5)
	if s.ProjectedTTFTP50.Valid() || s.GoodputAtSLORPM.Valid() {
		t.Errorf("projected p50 %v, goodput at SLO %v: want none", s.ProjectedTTFTP50, s.GoodputAtSLORPM)
	}
}

// TestSummarizeRefusals: refusals are counted by status, 429s by reason,
// and 429s waited out are counted apart from the ones that stood.
func TestSummarizeRefusals(t *testing.T) {
	ok := rec(0, 0.1, 1)
	ok.Retries = 2
	recs := []Record{
		ok,
		{StartWallS: 1, EndWallS: 1.1, Status: 429, Shed: true, Error: "status 429: x", RefusalReason: "tenant_over_share"},
		{StartWallS: 1, EndWallS: 1.1, Status: 429, Shed: true, Error: "status 429: x", RefusalReason: "tenant_over_share"},
		{StartWallS: 1, EndWallS: 1.1, Status: 429, Shed: true, Error: "status 429: x"},
		{StartWallS: 2, EndWallS: 2.1, Status: 503, Shed: true, Error: "status 503: x", RefusalReason: "queue_full"},
		{StartWallS: 2, EndWallS: 2.1, Status: 401, Error: "status 401: x", RefusalReason: "invalid_api_key"},
		{StartWallS: 3, EndWallS: 3.1, Status: 200, Error: "stream ended without [DONE]"},
		{StartWallS: 3, EndWallS: 3.1, Error: "connection refused"},
	}
	s := Summarize(recs, 1, 5)
	if s.Refused != 5 || s.Refused429 != 3 || s.Retried429 != 2 || s.Succeeded != 1 || s.ShedCount != 4 || s.ErrorCount != 3 {
		t.Errorf("refused %d, 429 %d, retried %d, ok %d, shed %d, errors %d; want 5, 3, 2, 1, 4, 3",
			s.Refused, s.Refused429, s.Retried429, s.Succeeded, s.ShedCount, s.ErrorCount)
	}
	wantStatus := map[string]int{"429": 3, "503": 1, "401": 1}
	wantReasons := map[string]int{"tenant_over_share": 2, UnknownReason: 1}
	if !maps.Equal(s.RefusedByStatus, wantStatus) || !maps.Equal(s.Refused429Reasons, wantReasons) {
		t.Errorf("by status %v, 429 reasons %v; want %v, %v", s.RefusedByStatus, s.Refused429Reasons, wantStatus, wantReasons)
	}
	b, _ := json.Marshal(s)
	for _, k := range []string{`"refused":5`, `"refused_by_status":{`, `"refused_429":3`, `"refused_429_reasons":{`, `"retried_429":2`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s", k)
		}
	}
}

// TestTenantShape pins the per-tenant keys other tools read: the tenant
// beside the figures of its own summary, refusal counts present at zero.
func TestTenantShape(t *testing.T) {
	f := File{Schema: Schema, Tenants: []*TenantSummary{{Tenant: "steady", Workload: "control", Priority: "critical",
		Summary: Summarize([]Record{rec(0, 1, 2)}, 1, 8)}}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Tenants []map[string]any `json:"tenants"`
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Tenants) != 1 {
		t.Fatalf("%s: %v", b, err)
	}
	s := back.Tenants[0]
	for _, k := range []string{"tenant", "workload", "priority", "requests", "succeeded", "refused", "refused_429", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "e2e_p50_s", "output_tokens_per_s"} {
		if _, ok := s[k]; !ok {
			t.Errorf("tenant summary has no %q", k)
		}
	}
	if s["tenant"] != "steady" || s["refused_429"] != 0.0 {
		t.Errorf("tenant %v, refused_429 %v", s["tenant"], s["refused_429"])
	}
}

// The achieved rate is in sessions per model second: successful requests
// per second over the run divided by the requests per session.
func TestAchievedRate(t *testing.T) {
	// Two conversations of two turns over 0 → 4 wall seconds at time
	// scale 10 (40 model seconds): 4 requests, 2 sessions.
	recs := []Record{rec(0, 0.1, 1), rec(1, 0.1, 1), rec(2, 0.1, 1), rec(3, 0.1, 1)}
	recs[0].Session, recs[1].Session, recs[2].Session, recs[3].Session = 0, 0, 1, 1
	s := Summarize(recs, 10, 5)
	if s.Sessions != 2 || !near(s.ThroughputRPS, 0.1) || !near(s.AchievedRate, 0.05) {
		t.Errorf("sessions %d, throughput %v, achieved rate %v; want 2, 0.1, 0.05", s.Sessions, s.ThroughputRPS, s.AchievedRate)
	}
	// Tenants' sessions are their own even with the same number.
	recs[2].Session, recs[3].Session, recs[2].Tenant, recs[3].Tenant = 0, 0, "b", "b"
	if s := Summarize(recs, 10, 5); s.Sessions != 2 {
		t.Errorf("sessions %d across tenants, want 2", s.Sessions)
	}
	p := s.Point()
	if !near(p.AchievedRate, 0.05) || p.TTFTP90 != s.TTFTP90 || p.OutputTokensPerS != s.OutputTokensPerS {
		t.Errorf("point %+v lacks the summary's figures", p)
	}
}

// TestTTFTGrowth: a queue that grows by a quarter of a second per second
// of arrivals (offered 1.25 times what the fleet sustains) shows as 0.25
// in whatever order the answers came and at any time scale; a fleet that
// keeps up, as 0; a failed request counts for nothing.
func TestTTFTGrowth(t *testing.T) {
	var growing, flat []Record
	for i := range 20 {
		at := float64(i) * 0.1
		growing = append(growing, rec(at, 0.2+0.25*at, 1))
		flat = append(flat, rec(at, 0.2+0.01*float64(i%2), 1))
	}
	slices.Reverse(growing)
	growing = append(growing, Record{StartWallS: 5, EndWallS: 5, Status: 503, Error: "shed", WallTTFTS: NaN, WallE2ES: NaN})
	for _, scale := range []float64{1, 10} {
		if s := Summarize(growing, scale, 5); !near(s.TTFTGrowth, 0.25) || !near(s.Point().TTFTGrowth, 0.25) || !near(s.Figures().TTFTGrowth, 0.25) {
			t.Errorf("scale %v: growth %v, point %v, figures %v; want 0.25", scale, s.TTFTGrowth, s.Point().TTFTGrowth, s.Figures().TTFTGrowth)
		}
	}
	if s := Summarize(flat, 10, 5); math.Abs(float64(s.TTFTGrowth)) > 0.01 {
		t.Errorf("flat: growth %v, want about 0", s.TTFTGrowth)
	}
	if s := Summarize(growing[:1], 10, 5); s.TTFTGrowth.Valid() {
		t.Errorf("one request: growth %v, want none", s.TTFTGrowth)
	}
}

// TestSummarizePredictor: the predictor's error is taken against the
// simulator's own TTFT where a record has one, else the client's, over
// the successful records carrying a prediction.
func TestSummarizePredictor(t *testing.T) {
	var recs []Record
	for i, c := range []struct{ predicted, sim float64 }{{1, 1}, {1.2, 1}, {0.5, 1}, {2, 1}} {
		r := rec(float64(i), 0.2, 1) // client TTFT 0.2 wall = 2 model s
		r.PredictedTTFTS, r.SimTTFTS = Num(c.predicted), Num(c.sim)
		recs = append(recs, r)
	}
	noSim := rec(5, 0.2, 1)
	noSim.PredictedTTFTS = 1 // against the client's 2 s: 50 % off
	failed := rec(6, 0.2, 1)
	failed.PredictedTTFTS, failed.Error = 9, "boom"
	unpredicted := rec(7, 0.2, 1)
	unpredicted.PredictedTTFTS = NaN
	recs = append(recs, noSim, failed, unpredicted)
	s := Summarize(recs, 10, 8)
	// Errors 0, 0.2, 0.5, 1 (of 1 s) and 1 (of 2 s): 0 %, 20 %, 50 %, 100 %, 50 %.
	if s.PredictorSamples != 5 || !near(s.PredictorMAPE, (0+0.2+0.5+1+0.5)/5) {
		t.Fatalf("predictor over %d: MAPE %v", s.PredictorSamples, s.PredictorMAPE)
	}
	if !near(s.PredictorMedianAPE, 0.5) {
		t.Fatalf("median APE %v, want 0.5 (of 0, 0.2, 0.5, 0.5, 1)", s.PredictorMedianAPE)
	}
	// Against the client's 2 s (0.2 wall × 10): predictions 1, 1.2, 0.5, 2, 1
	// are 50, 40, 75, 0, 50 % off.
	if !near(s.PredictorMeasuredMAPE, (0.5+0.4+0.75+0+0.5)/5) || !near(s.PredictorMeasuredMedianAPE, 0.5) {
		t.Fatalf("against the measured TTFT: MAPE %v, median %v", s.PredictorMeasuredMAPE, s.PredictorMeasuredMedianAPE)
	}
	if s.PredictorP90AbsErr < 0.5 || s.PredictorP90AbsErr > 1 {
		t.Fatalf("p90 absolute error %v, want within the largest errors (0.5 to 1 s)", s.PredictorP90AbsErr)
	}
	if s := Summarize([]Record{unpredicted}, 10, 8); s.PredictorSamples != 0 || s.PredictorMAPE != 0 {
		t.Fatalf("without predictions: %+v", s)
	}
}
