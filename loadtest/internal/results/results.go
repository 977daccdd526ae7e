// Package results is the load generator's output: one Record per request,
// a Summary per (workload, strategy), and the File that holds them under
// the stable `workloads.<workload>.<strategy>` shape other tools read.
//
// Times are model seconds: wall seconds multiplied by the time scale the
// simulated fleet runs at (1 against real servers), so they compare with
// figures measured on GPUs. Each summary repeats the latencies in wall
// seconds under "wall".
package results

import (
	"cmp"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/stats"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Schema names the layout of File; a change that breaks readers changes it.
const Schema = "switchyard.loadtest/v1"

// Strategy names.
const (
	Random     = "random"
	RoundRobin = "round-robin"
	LeastQueue = "least-queue"
	Switchyard = "switchyard"
	// Approximate is Switchyard's router without KV events, on its
	// approximate index of its own past decisions (compare's analogue of
	// llm-d's approximate prefix scorer).
	Approximate = "approximate"
	Oracle      = "oracle"
	Direct      = "direct"
)

// Record is one request.
type Record struct {
	// Tenant is the tenant that sent the request (loadtest run
	// --tenant); empty in a run without tenants.
	Tenant      string  `json:"tenant,omitempty"`
	Workload    string  `json:"workload"`
	Strategy    string  `json:"strategy"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Session     int     `json:"session"`
	Turn        int     `json:"turn"`
	// Group is the shared prefix of a shared-prefix request; -1 otherwise.
	Group int `json:"group"`
	// Target is the worker a baseline picked; empty when the server
	// picked (the gateway).
	Target string `json:"target,omitempty"`
	// SimWorker is the index of the simulated worker that served the
	// request, whoever picked it; null against a real server.
	SimWorker *int `json:"sim_worker"`
	// StartS is when the request was sent, since the run's start.
	StartS float64 `json:"start_s"`
	Status int     `json:"status"`
	Error  string  `json:"error,omitempty"`
	Shed   bool    `json:"shed,omitempty"`
	// RefusalReason is why the server refused the request (a status other
	// than 200): its x-switchyard-shed-reason header, else the code of its
	// OpenAI error body.
	RefusalReason string `json:"refusal_reason,omitempty"`
	// Retries is how many 429 answers were waited out (their Retry-After)
	// before the answer recorded here; timings count from the first
	// attempt, as its user waited from then.
	Retries int `json:"retries,omitempty"`
	// Model seconds.
	TTFTS    Num `json:"ttft_s"`
	E2ES     Num `json:"e2e_s"`
	ITLMeanS Num `json:"itl_mean_s"`
	// Wall seconds.
	WallTTFTS Num `json:"wall_ttft_s"`
	WallE2ES  Num `json:"wall_e2e_s"`
	// SimTTFTS is the simulator's own TTFT (model seconds), free of
	// client-side noise; null against a real server.
	SimTTFTS Num `json:"sim_ttft_s"`
	// ProjectedTTFTS is the TTFT a client of a real fleet would see
	// (model seconds): the simulator's own TTFT plus the time spent
	// outside the simulated engine (client, network, gateway, router) at
	// wall speed. Scaling that outside time by the time scale, as TTFTS
	// does, would charge a proxy's few milliseconds ten or twenty times
	// over. Null against a real server.
	ProjectedTTFTS Num `json:"projected_ttft_s"`
	// PredictedTTFTS is the TTFT the router predicted when it routed the
	// request (model seconds: its wall prediction × the time scale), from
	// a Switchyard gateway with --decision-headers; null otherwise.
	PredictedTTFTS   Num `json:"predicted_ttft_s"`
	PromptTokens     int `json:"prompt_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// Chunks is the number of text chunks received.
	Chunks int `json:"chunks"`
	// Gaps are the inter-chunk gaps in wall seconds; kept for the summary,
	// not written.
	Gaps []float64 `json:"-"`
	// EndS is when the request ended, since the run's start (wall).
	EndWallS float64 `json:"-"`
	// StartWallS is StartS in wall seconds.
	StartWallS float64 `json:"-"`
}

// OK reports a successful request.
func (r *Record) OK() bool { return r.Error == "" }

// Latency holds the latency percentiles of a run.
type Latency struct {
	TTFTP50  Num `json:"ttft_p50_s"`
	TTFTP90  Num `json:"ttft_p90_s"`
	TTFTP95  Num `json:"ttft_p95_s"`
	TTFTP99  Num `json:"ttft_p99_s"`
	TTFTMean Num `json:"ttft_mean_s"`
	ITLP50   Num `json:"itl_p50_s"`
	ITLP90   Num `json:"itl_p90_s"`
	ITLP95   Num `json:"itl_p95_s"`
	ITLP99   Num `json:"itl_p99_s"`
	E2EP50   Num `json:"e2e_p50_s"`
	E2EP90   Num `json:"e2e_p90_s"`
	E2EP95   Num `json:"e2e_p95_s"`
	E2EP99   Num `json:"e2e_p99_s"`
}

// Summary is one run (or, in a comparison, the headline run of one
// strategy on one workload, with its sweep).
type Summary struct {
	Latency
	// Wall is Latency in wall seconds.
	Wall Latency `json:"wall"`
	// SimTTFT percentiles come from the simulator's own timings, when the
	// server is the simulator.
	SimTTFTP50 Num `json:"sim_ttft_p50_s"`
	SimTTFTP95 Num `json:"sim_ttft_p95_s"`
	// SimLag is how much later than the simulator's own account the
	// client saw the first token (model seconds, per request): HTTP and
	// proxy time plus any lag of an overloaded simulator behind its
	// clock. Large values mean the time scale is too high for the
	// machine.
	SimLagP50 Num     `json:"sim_lag_p50_s"`
	SimLagP95 Num     `json:"sim_lag_p95_s"`
	TimeScale float64 `json:"time_scale"`
	// ProjectedTTFT percentiles are those of Record.ProjectedTTFTS: what
	// the ratios against random and oracle use when every strategy has
	// them (see Params.TTFTBasis).
	ProjectedTTFTP50 Num `json:"projected_ttft_p50_s"`
	ProjectedTTFTP90 Num `json:"projected_ttft_p90_s"`
	ProjectedTTFTP95 Num `json:"projected_ttft_p95_s"`

	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the offered rate of an open-loop run: sessions per model
	// second, i.e. requests per second for single-turn workloads and
	// conversations per second for multi-turn.
	Rate     float64 `json:"rate,omitempty"`
	Requests int     `json:"requests"`
	// Sessions counts the sessions (conversations; one per request on
	// single-turn workloads) the requests belong to.
	Sessions  int `json:"sessions"`
	Succeeded int `json:"succeeded"`
	// AchievedRate is what the fleet delivered, in Rate's unit: successful
	// requests per model second over the run (first request sent to last
	// answer, so a backlog's drain counts) divided by the requests per
	// session. Below Rate, the fleet did not keep up with the offered load.
	AchievedRate Num `json:"achieved_rate"`
	// TTFTGrowth is the least-squares slope of each request's TTFT against
	// when it was sent (seconds of TTFT per second of the run). It tells
	// whether an open loop's fleet keeps up better than AchievedRate can in
	// a run of minutes, whose drain lowers AchievedRate even when nothing
	// queues: about 0 when the fleet keeps up; when it does not, its queue
	// grows and each arrival waits longer than the one before, by about
	// offered/sustained − 1 (so the rate it sustains is about the offered
	// rate / (1 + TTFTGrowth)).
	TTFTGrowth Num `json:"ttft_growth"`
	// Open-loop runs: Arrivals counts the scheduled arrivals that came
	// within the budget, ArrivalsOverBound those not sent because
	// MaxInFlight sessions were already in flight (the client's bound, not
	// the server's refusal), PeakInFlight the most sessions in flight.
	Arrivals          int `json:"arrivals,omitempty"`
	ArrivalsOverBound int `json:"arrivals_over_bound"`
	MaxInFlight       int `json:"max_in_flight,omitempty"`
	PeakInFlight      int `json:"peak_in_flight,omitempty"`
	ShedCount         int `json:"shed"`
	ErrorCount        int `json:"errors"`
	ShedRate          Num `json:"shed_rate"`
	ErrorRate         Num `json:"error_rate"`
	// ErrorSamples are a few distinct error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Refused counts the requests the server answered with a status
	// other than 200 (they are also counted in shed or errors);
	// RefusedByStatus splits them by status ("429": n).
	Refused         int            `json:"refused"`
	RefusedByStatus map[string]int `json:"refused_by_status,omitempty"`
	// Refused429 counts the 429 answers, Refused429Reasons them by reason
	// (x-switchyard-shed-reason, else the error body's code; "unknown"
	// for neither).
	Refused429        int            `json:"refused_429"`
	Refused429Reasons map[string]int `json:"refused_429_reasons,omitempty"`
	// Retried429 counts the 429 answers waited out and retried
	// (--retry-after); they are not in Refused.
	Retried429 int `json:"retried_429,omitempty"`

	DurationS        Num `json:"duration_s"`
	WallDurationS    Num `json:"wall_duration_s"`
	ThroughputRPS    Num `json:"throughput_rps"`
	OutputTokensPerS Num `json:"output_tokens_per_s"`
	// GoodputRPM is requests per minute that succeeded within the TTFT
	// SLO; SLOAttainment the fraction of all requests that did.
	SLOTTFTS      float64 `json:"slo_ttft_s"`
	GoodputRPM    Num     `json:"goodput_rpm"`
	SLOAttainment Num     `json:"slo_attainment"`
	// CacheHitRatio is cached prompt tokens over prompt tokens, from the
	// usage the server reported.
	CacheHitRatio    Num `json:"cache_hit_ratio"`
	PromptTokensMean Num `json:"prompt_tokens_mean"`

	// The router's TTFT predictor against what happened, over the
	// successful requests that carry a prediction (PredictorSamples; 0
	// for strategies that are not the router): its mean absolute
	// percentage error, its median (a few requests far off move the mean
	// between runs of one build; the median says what most requests saw)
	// and the 90th percentile of its absolute error (model seconds). The
	// truth is the simulator's own TTFT where there is one (free of the
	// client's time), else the client's.
	PredictorSamples   int `json:"predictor_samples,omitempty"`
	PredictorMAPE      Num `json:"predictor_mape,omitzero"`
	PredictorMedianAPE Num `json:"predictor_median_ape,omitzero"`
	PredictorP90AbsErr Num `json:"predictor_p90_abs_error_s,omitzero"`
	// PredictorMeasuredMAPE and PredictorMeasuredMedianAPE are the same
	// errors against the TTFT the client measured. Against a simulator at
	// a time scale the two differ: the few wall milliseconds spent outside
	// the engine (client, gateway, router) count time-scale times over in
	// model seconds, 15–25 % of a cached request's engine TTFT at
	// --time-scale 10. Equal to the figures above without a simulator.
	PredictorMeasuredMAPE      Num `json:"predictor_measured_mape,omitzero"`
	PredictorMeasuredMedianAPE Num `json:"predictor_measured_median_ape,omitzero"`
	// PredictorRouterMAPE is the error as the router scores it: the mean
	// of its switchyard_router_ttft_prediction_relative_error over the run
	// (|observed − predicted| / observed, the prediction made when it
	// routed), against the TTFT the gateway measured from sending upstream
	// to the first token — what the router learns from, free of the time
	// before the gateway sends (the client's request, the Route call) that
	// the client's TTFT has, and in the same units as the prediction
	// whatever the time scale. PredictorRouterSamples counts its
	// completions (those the router did not set aside as disturbed by a
	// failed scrape). Only for runs through Switchyard's router.
	PredictorRouterMAPE    Num `json:"predictor_router_mape,omitzero"`
	PredictorRouterSamples int `json:"predictor_router_samples,omitempty"`

	// Runs are each run's TTFT figures when the configuration ran more
	// than once (compare --repeat); the figures above are their medians.
	Runs []RunFigures `json:"runs,omitempty"`

	// TTFTQuantiles are the TTFT quantiles at 0, 2, 4, …, 100 %, for plots.
	TTFTQuantiles []Num `json:"ttft_quantiles_s,omitempty"`

	// Comparison with the other strategies of the same workload: ratios
	// above 1 mean this strategy is better.
	TTFTP50VsRandom    Num `json:"ttft_p50_vs_random,omitzero"`
	TTFTP95VsRandom    Num `json:"ttft_p95_vs_random,omitzero"`
	E2EP50VsRandom     Num `json:"e2e_p50_vs_random,omitzero"`
	GoodputVsRandom    Num `json:"goodput_vs_random,omitzero"`
	TTFTP50GapToOracle Num `json:"ttft_p50_gap_to_oracle,omitzero"`
	// The same comparisons on projected TTFTs.
	ProjectedTTFTP50VsRandom    Num `json:"projected_ttft_p50_vs_random,omitzero"`
	ProjectedTTFTP95VsRandom    Num `json:"projected_ttft_p95_vs_random,omitzero"`
	ProjectedTTFTP50GapToOracle Num `json:"projected_ttft_p50_gap_to_oracle,omitzero"`

	// Goodput across the sweep (see the compare package's Goodput).
	// SLOMetConcurrency is the highest level at which the strategy met
	// the SLO (attainment at least SLOAttainmentTarget); 0 when it met it
	// at none.
	SLOAttainmentTarget float64 `json:"slo_attainment_target,omitzero"`
	SLOMetConcurrency   int     `json:"slo_met_concurrency"`
	// GoodputAtSLO is the goodput at SLOMetConcurrency (at the best
	// goodput's level when the SLO was met at none), compared with
	// random's goodput at the same level: the reference's reading.
	GoodputAtSLOConcurrency int `json:"goodput_at_slo_concurrency,omitzero"`
	GoodputAtSLORPM         Num `json:"goodput_at_slo_rpm"`
	GoodputAtSLOVsRandom    Num `json:"goodput_at_slo_vs_random,omitzero"`
	// GoodputBest is the highest goodput over the sweep, compared with
	// random's highest: each strategy at its own best load.
	GoodputBestConcurrency int `json:"goodput_best_concurrency,omitzero"`
	GoodputBestRPM         Num `json:"goodput_best_rpm"`
	GoodputBestVsRandom    Num `json:"goodput_best_vs_random,omitzero"`
	// In the open-loop loads the same figures are taken over the offered
	// rates instead of the concurrency levels: SLOMetRate is the highest
	// rate at which the strategy met the SLO (absent when it met it at
	// none; an arrival not sent at the in-flight bound counts as a miss),
	// GoodputAtSLORate and GoodputBestRate the rates the goodputs above
	// were taken at, and the concurrency fields stay 0.
	SLOMetRate       float64 `json:"slo_met_rate,omitempty"`
	GoodputAtSLORate float64 `json:"goodput_at_slo_rate,omitempty"`
	GoodputBestRate  float64 `json:"goodput_best_rate,omitempty"`
	// Where random did not run, the goodputs are compared with the better
	// of round-robin's and least-queue's instead (the best simple
	// strategy): at the same level or rate, and best against best.
	GoodputAtSLOVsBestSimple Num `json:"goodput_at_slo_vs_best_simple,omitzero"`
	GoodputBestVsBestSimple  Num `json:"goodput_best_vs_best_simple,omitzero"`

	// Sweep is every load level run, the headline one included.
	Sweep []Point `json:"sweep,omitempty"`
}

// Point is one load level of a sweep: a concurrency (closed loop) or an
// offered rate (open loop).
type Point struct {
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Requests    int     `json:"requests"`
	TTFTP50     Num     `json:"ttft_p50_s"`
	TTFTP90     Num     `json:"ttft_p90_s"`
	TTFTP95     Num     `json:"ttft_p95_s"`
	TTFTP99     Num     `json:"ttft_p99_s"`
	E2EP50      Num     `json:"e2e_p50_s"`
	E2EP90      Num     `json:"e2e_p90_s"`
	ITLP50      Num     `json:"itl_p50_s"`
	ITLP90      Num     `json:"itl_p90_s"`
	// OutputTokensPerS, AchievedRate, TTFTGrowth and the arrival counts
	// are Summary's at this level.
	OutputTokensPerS  Num `json:"output_tokens_per_s"`
	AchievedRate      Num `json:"achieved_rate"`
	TTFTGrowth        Num `json:"ttft_growth"`
	Arrivals          int `json:"arrivals,omitempty"`
	ArrivalsOverBound int `json:"arrivals_over_bound"`
	PeakInFlight      int `json:"peak_in_flight,omitempty"`
	ThroughputRPS     Num `json:"throughput_rps"`
	GoodputRPM        Num `json:"goodput_rpm"`
	SLOAttainment     Num `json:"slo_attainment"`
	ShedRate          Num `json:"shed_rate"`
	CacheHitRatio     Num `json:"cache_hit_ratio"`
	// ProjectedTTFTP50 is Summary.ProjectedTTFTP50 at this level.
	ProjectedTTFTP50 Num `json:"projected_ttft_p50_s"`
	// Runs are each run's figures when the level ran more than once
	// (compare --repeat); the figures above are their medians, the
	// counts their sums.
	Runs []RunFigures `json:"runs,omitempty"`
}

// Point is the summary's sweep entry.
func (s *Summary) Point() Point {
	return Point{
		Concurrency: s.Concurrency, Rate: s.Rate, Requests: s.Requests,
		TTFTP50: s.TTFTP50, TTFTP90: s.TTFTP90, TTFTP95: s.TTFTP95, TTFTP99: s.TTFTP99,
		E2EP50: s.E2EP50, E2EP90: s.E2EP90, ITLP50: s.ITLP50, ITLP90: s.ITLP90,
		OutputTokensPerS: s.OutputTokensPerS, AchievedRate: s.AchievedRate, TTFTGrowth: s.TTFTGrowth,
		Arrivals: s.Arrivals, ArrivalsOverBound: s.ArrivalsOverBound, PeakInFlight: s.PeakInFlight,
		ThroughputRPS: s.ThroughputRPS, GoodputRPM: s.GoodputRPM, SLOAttainment: s.SLOAttainment,
		ShedRate: s.ShedRate, CacheHitRatio: s.CacheHitRatio, ProjectedTTFTP50: s.ProjectedTTFTP50,
		Runs: s.Runs,
	}
}

// Params are the parameters of a run or comparison.
type Params struct {
	Command    string   `json:"command"`
	Mode       string   `json:"mode"`
	TimeScale  float64  `json:"time_scale"`
	TimeUnit   string   `json:"time_unit"`
	Model      string   `json:"model"`
	Target     string   `json:"target,omitempty"`
	Workers    int      `json:"workers,omitempty"`
	Strategies []string `json:"strategies"`
	// Concurrency is the headline level when one was fixed for every
	// workload; 0 when Headline chose one per workload.
	Concurrency int `json:"concurrency,omitempty"`
	// Sweep is every level run, over all workloads; SweepByWorkload the
	// levels of each workload.
	Sweep           []int            `json:"sweep,omitempty"`
	SweepByWorkload map[string][]int `json:"sweep_by_workload,omitempty"`
	// Rate is the offered rate of a single open-loop run (loadtest run
	// --mode constant|poisson), sessions per model second.
	Rate float64 `json:"rate,omitempty"`
	// Load is compare's load: "concurrency" (closed loop over the sweep),
	// "rate" (open loop at Rates) or "rate-sweep" (open loop at rates
	// spread below each workload's saturation rate). Arrivals is the
	// open-loop arrival process, "constant" or "poisson".
	Load     string `json:"load,omitempty"`
	Arrivals string `json:"arrivals,omitempty"`
	// RatesByWorkload are the offered rates each workload ran at
	// (sessions per model second); MaxInFlight the open loop's bound on
	// sessions in flight.
	RatesByWorkload map[string][]float64 `json:"rates_by_workload,omitempty"`
	MaxInFlight     int                  `json:"max_in_flight,omitempty"`
	// RateSweep is how the rate sweep spread its rates, Saturation each
	// workload's saturation run.
	RateSweep  *RateSweep            `json:"rate_sweep,omitempty"`
	Saturation map[string]Saturation `json:"saturation,omitempty"`
	// Requests bounds each run; RequestsByWorkload when workloads differ.
	Requests           int            `json:"requests,omitempty"`
	RequestsByWorkload map[string]int `json:"requests_by_workload,omitempty"`
	// Headline says, per workload, which level the summaries under
	// workloads.<workload> describe and why.
	Headline map[string]Headline `json:"headline,omitempty"`
	// TTFTBasis is the TTFT the ratios in the table and the bar compare:
	// "projected" (ProjectedTTFT, when every strategy has it) or "client"
	// (the client's measurement × time scale).
	TTFTBasis string `json:"ttft_basis,omitempty"`
	// SLOAttainment is the fraction of requests within the TTFT SLO at
	// which a level counts as meeting the SLO.
	SLOAttainment float64 `json:"slo_attainment,omitempty"`
	// Repeat is how many times each configuration ran; figures are
	// medians over the runs.
	Repeat    int     `json:"repeat,omitempty"`
	DurationS float64 `json:"duration_s,omitempty"`
	// SLOTTFTS is the TTFT SLO of each workload, model seconds.
	SLOTTFTS map[string]float64 `json:"slo_ttft_s"`
	// Workloads are the workload shapes.
	Workloads map[string]workload.Spec `json:"workloads"`
	// Tenants are the tenants of a run with --tenant.
	Tenants []Tenant `json:"tenants,omitempty"`
	// RetryAfter: 429 answers with Retry-After were waited out and sent
	// again (false: counted as refusals).
	RetryAfter bool `json:"retry_after,omitempty"`
	// SimArgs are extra flags the simulated fleet ran with.
	SimArgs []string `json:"sim_args,omitempty"`
	// KVEvents: switchyard ran as deployed, its router fed by KV events
	// (false: on its approximate index, over the baselines' fleet).
	KVEvents bool `json:"kv_events,omitempty"`
	// Bystanders is the share of each run's load sent straight to the
	// workers behind the router's back (compare --bystanders); their
	// records are not in the summaries.
	Bystanders  float64   `json:"bystanders,omitempty"`
	Cores       int       `json:"cores"`
	GoVersion   string    `json:"go_version"`
	Started     time.Time `json:"started"`
	WallSeconds float64   `json:"wall_seconds"`
}

// RateSweep is the rate sweep's spread: Points rates evenly spaced from
// Low to High times the saturation rate, found by a closed-loop run of
// Strategy at Concurrency clients.
type RateSweep struct {
	Points      int     `json:"points"`
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	Strategy    string  `json:"strategy"`
	Concurrency int     `json:"concurrency"`
}

// Saturation is one workload's saturation run: a closed loop at
// Concurrency clients under Strategy.
type Saturation struct {
	Strategy    string `json:"strategy"`
	Concurrency int    `json:"concurrency"`
	Requests    int    `json:"requests"`
	// RequestsPerS is the successful requests per model second while the
	// loop was full (Window "full": from the first answer to the last
	// request sent, when every client had a request in flight), or over
	// the whole run (Window "run") when that window was empty.
	RequestsPerS Num    `json:"requests_per_s"`
	Window       string `json:"window"`
	// Rate is RequestsPerS in sessions per model second (divided by the
	// requests per session): the saturation rate the sweep's rates are
	// fractions of.
	Rate Num `json:"rate"`
}

// Headline is how a workload's headline level was chosen.
type Headline struct {
	Concurrency int `json:"concurrency"`
	// Rate is the headline's offered rate in the open-loop loads, where
	// Rule is "top-rate" (the highest rate run) or "reference-p90".
	Rate float64 `json:"rate,omitempty"`
	// Rule is "reference" (random's median TTFT closest to the reference
	// Service baseline's), "fixed" (--concurrency) or "middle" (the middle
	// level, when the rule had nothing to go on); in the open loop
	// "top-rate", or "reference-p90" (random's TTFT p90 closest to the
	// reference's random, on prefix-pressure: llm-d's 93 s).
	Rule string `json:"rule"`
	// RandomTTFTP50 is random's median TTFT at the chosen level and
	// ReferenceTTFTP50 the reference baseline's, model seconds; the P90s
	// the same for the "reference-p90" rule.
	RandomTTFTP50    Num `json:"random_ttft_p50_s,omitzero"`
	ReferenceTTFTP50 Num `json:"reference_ttft_p50_s,omitzero"`
	RandomTTFTP90    Num `json:"random_ttft_p90_s,omitzero"`
	ReferenceTTFTP90 Num `json:"reference_ttft_p90_s,omitzero"`
}

// TTFT bases.
const (
	BasisProjected = "projected"
	BasisClient    = "client"
)

// TimeUnit explains the times in a File.
const TimeUnit = "model seconds (wall seconds × time_scale); see wall for wall seconds"

// File is the JSON a run or comparison writes.
type File struct {
	Schema    string                         `json:"schema"`
	Params    Params                         `json:"params"`
	Workloads map[string]map[string]*Summary `json:"workloads"`
	// Bar is the comparison with the reference system's published ratios,
	// when the strategies needed were run.
	Bar []Check `json:"bar,omitempty"`
	// Tenants are the summaries of each tenant's requests, in the order
	// of the --tenant flags, when the run had tenants; the summary under
	// workloads covers every tenant's requests together.
	Tenants []*TenantSummary `json:"tenants,omitempty"`
}

// TenantSummary is one tenant's share of a run: the Summary of its
// requests alone, under its name.
type TenantSummary struct {
	Tenant   string `json:"tenant"`
	Workload string `json:"workload"`
	// Priority is the x-switchyard-priority its requests carried; empty
	// for none.
	Priority string `json:"priority,omitempty"`
	*Summary
}

// Tenant describes one tenant of a run in Params.
type Tenant struct {
	Name string `json:"name"`
	// KeyEnv is the environment variable its API key came from (never
	// the key itself).
	KeyEnv      string  `json:"key_env"`
	Workload    string  `json:"workload"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Priority    string  `json:"priority,omitempty"`
	// Seed is the seed of its prompts, distinct per tenant so that
	// tenants share no prompt prefix.
	Seed uint64 `json:"seed"`
}

// Check is one line of the bar.
type Check struct {
	Workload string `json:"workload"`
	Metric   string `json:"metric"`
	// Want is the reference's figure, Got ours; Pass compares them in the
	// metric's direction.
	Want Num  `json:"want"`
	Got  Num  `json:"got"`
	Pass bool `json:"pass"`
	// Concurrency is the level the figure was taken at, when it was one;
	// Rate the offered rate, in the open-loop loads.
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Note        string  `json:"note,omitempty"`
}

// RunFigures are one run's figures (model seconds) among repeated runs of
// a configuration: its TTFT percentiles, plain and projected, and what
// the open loop's table and plots show, so that the spread behind each
// median stays visible.
type RunFigures struct {
	TTFTP50          Num `json:"ttft_p50_s"`
	TTFTP90          Num `json:"ttft_p90_s"`
	TTFTP95          Num `json:"ttft_p95_s"`
	TTFTP99          Num `json:"ttft_p99_s"`
	ProjectedTTFTP50 Num `json:"projected_ttft_p50_s"`
	ProjectedTTFTP90 Num `json:"projected_ttft_p90_s"`
	ProjectedTTFTP95 Num `json:"projected_ttft_p95_s"`
	ITLP50           Num `json:"itl_p50_s"`
	E2EP50           Num `json:"e2e_p50_s"`
	GoodputRPM       Num `json:"goodput_rpm"`
	SLOAttainment    Num `json:"slo_attainment"`
	OutputTokensPerS Num `json:"output_tokens_per_s"`
	AchievedRate     Num `json:"achieved_rate"`
	TTFTGrowth       Num `json:"ttft_growth"`
	// Open loop: this run's arrivals and those not sent at the bound.
	Arrivals          int `json:"arrivals,omitempty"`
	ArrivalsOverBound int `json:"arrivals_over_bound,omitempty"`
}

// Figures are the summary's figures as one of several runs.
func (s *Summary) Figures() RunFigures {
	return RunFigures{
		TTFTP50: s.TTFTP50, TTFTP90: s.TTFTP90, TTFTP95: s.TTFTP95, TTFTP99: s.TTFTP99,
		ProjectedTTFTP50: s.ProjectedTTFTP50, ProjectedTTFTP90: s.ProjectedTTFTP90, ProjectedTTFTP95: s.ProjectedTTFTP95,
		ITLP50: s.ITLP50, E2EP50: s.E2EP50, GoodputRPM: s.GoodputRPM, SLOAttainment: s.SLOAttainment,
		OutputTokensPerS: s.OutputTokensPerS, AchievedRate: s.AchievedRate, TTFTGrowth: s.TTFTGrowth,
		Arrivals: s.Arrivals, ArrivalsOverBound: s.ArrivalsOverBound,
	}
}

// UnknownReason counts a 429 that said neither why nor a code.
const UnknownReason = "unknown"

// Summarize computes the summary of one run's records. scale converts wall
// to model seconds; slo is the TTFT SLO in model seconds.
func Summarize(recs []Record, scale, slo float64) *Summary {
	s := &Summary{TimeScale: scale, SLOTTFTS: slo, Requests: len(recs),
		GoodputAtSLORPM: NaN, GoodputBestRPM: NaN}
	var ttft, itl, e2e, wttft, witl, we2e, sim, lag, proj, predAbs, predPct, measPct, sent []float64
	var prompt, cached, output, good int
	first, last := math.Inf(1), math.Inf(-1)
	seen := map[string]bool{}
	type sessionKey struct {
		tenant  string
		session int
	}
	sessions := map[sessionKey]bool{}
	for i := range recs {
		r := &recs[i]
		sessions[sessionKey{r.Tenant, r.Session}] = true
		first = min(first, r.StartWallS)
		last = max(last, r.EndWallS)
		s.Retried429 += r.Retries
		if r.Status != 0 && r.Status != http.StatusOK {
			s.Refused++
			if s.RefusedByStatus == nil {
				s.RefusedByStatus = map[string]int{}
			}
			s.RefusedByStatus[strconv.Itoa(r.Status)]++
			if r.Status == http.StatusTooManyRequests {
				s.Refused429++
				if s.Refused429Reasons == nil {
					s.Refused429Reasons = map[string]int{}
				}
				s.Refused429Reasons[cmp.Or(r.RefusalReason, UnknownReason)]++
			}
		}
		if !r.OK() {
			if r.Shed {
				s.ShedCount++
			} else {
				s.ErrorCount++
			}
			if !seen[r.Error] && len(seen) < 3 {
				seen[r.Error] = true
				s.ErrorSamples = append(s.ErrorSamples, r.Error)
			}
			continue
		}
		s.Succeeded++
		wt, we := float64(r.WallTTFTS), float64(r.WallE2ES)
		wttft, we2e, sent = append(wttft, wt), append(we2e, we), append(sent, r.StartWallS)
		ttft, e2e = append(ttft, wt*scale), append(e2e, we*scale)
		for _, g := range r.Gaps {
			witl, itl = append(witl, g), append(itl, g*scale)
		}
		if r.SimTTFTS.Valid() {
			sim = append(sim, float64(r.SimTTFTS))
			lag = append(lag, wt*scale-float64(r.SimTTFTS))
		}
		if r.SimTTFTS.Valid() && r.ProjectedTTFTS.Valid() {
			proj = append(proj, float64(r.ProjectedTTFTS))
		}
		truth := Num(wt * scale)
		if r.SimTTFTS.Valid() {
			truth = r.SimTTFTS
		}
		if r.PredictedTTFTS.Valid() && r.PredictedTTFTS > 0 && truth.Valid() && truth > 0 {
			abs := math.Abs(float64(r.PredictedTTFTS - truth))
			predAbs, predPct = append(predAbs, abs), append(predPct, abs/float64(truth))
			if wt > 0 {
				measPct = append(measPct, math.Abs(float64(r.PredictedTTFTS)-wt*scale)/(wt*scale))
			}
		}
		prompt += r.PromptTokens
		cached += r.CachedTokens
		output += r.CompletionTokens
		if wt*scale <= slo {
			good++
		}
	}
	s.TTFTGrowth = Num(stats.Slope(sent, wttft)) // before latency sorts wttft
	s.Latency = latency(ttft, itl, e2e)
	s.Wall = latency(wttft, witl, we2e)
	p, l := stats.Summarize(sim), stats.Summarize(lag)
	s.SimTTFTP50, s.SimTTFTP95, s.SimLagP50, s.SimLagP95 = Num(p.P50), Num(p.P95), Num(l.P50), Num(l.P95)
	// Projected figures only when every successful request has one: a
	// percentile over part of a run would not be the run's.
	s.ProjectedTTFTP50, s.ProjectedTTFTP90, s.ProjectedTTFTP95 = NaN, NaN, NaN
	if len(proj) > 0 && len(proj) == len(ttft) {
		pr := stats.Summarize(proj)
		s.ProjectedTTFTP50, s.ProjectedTTFTP90, s.ProjectedTTFTP95 = Num(pr.P50), Num(pr.P90), Num(pr.P95)
	}
	if s.PredictorSamples = len(predAbs); s.PredictorSamples > 0 {
		pct := stats.Summarize(predPct)
		s.PredictorMAPE, s.PredictorMedianAPE = Num(pct.Mean), Num(pct.P50)
		s.PredictorP90AbsErr = Num(stats.Summarize(predAbs).P90)
		meas := stats.Summarize(measPct)
		s.PredictorMeasuredMAPE, s.PredictorMeasuredMedianAPE = Num(meas.Mean), Num(meas.P50)
	}
	s.TTFTQuantiles = nums(stats.Quantiles(ttft, 50))
	n := float64(len(recs))
	s.ShedRate, s.ErrorRate = ratio(float64(s.ShedCount), n), ratio(float64(s.ErrorCount), n)
	s.SLOAttainment = ratio(float64(good), n)
	s.Sessions = len(sessions)
	wall := last - first
	if len(recs) == 0 || wall <= 0 {
		s.DurationS, s.WallDurationS, s.ThroughputRPS, s.OutputTokensPerS, s.GoodputRPM, s.AchievedRate = NaN, NaN, NaN, NaN, NaN, NaN
	} else {
		model := wall * scale
		s.DurationS, s.WallDurationS = Num(model), Num(wall)
		s.ThroughputRPS = Num(float64(s.Succeeded) / model)
		s.AchievedRate = Num(float64(s.Succeeded) / model * float64(s.Sessions) / n)
		s.OutputTokensPerS = Num(float64(output) / model)
		s.GoodputRPM = Num(float64(good) / (model / 60))
	}
	s.CacheHitRatio = ratio(float64(cached), float64(prompt))
	s.PromptTokensMean = ratio(float64(prompt), float64(s.Succeeded))
	return s
}

func latency(ttft, itl, e2e []float64) Latency {
	t, i, e := stats.Summarize(ttft), stats.Summarize(itl), stats.Summarize(e2e)
	return Latency{
		TTFTP50: Num(t.P50), TTFTP90: Num(t.P90), TTFTP95: Num(t.P95), TTFTP99: Num(t.P99), TTFTMean: Num(t.Mean),
		ITLP50: Num(i.P50), ITLP90: Num(i.P90), ITLP95: Num(i.P95), ITLP99: Num(i.P99),
		E2EP50: Num(e.P50), E2EP90: Num(e.P90), E2EP95: Num(e.P95), E2EP99: Num(e.P99),
	}
}

func ratio(a, b float64) Num {
	if b == 0 {
		return NaN
	}
	return Num(a / b)
}

func nums(xs []float64) []Num {
	out := make([]Num, len(xs))
	for i, x := range xs {
		out[i] = Num(x)
	}
	return out
}

// Project is a request's projected TTFT (model seconds) from its wall TTFT
// and the simulator's own TTFT: the time outside the engine counts once, at
// wall speed. It is never below the simulator's TTFT (the engine's clock
// can run slightly ahead of the wall).
func Project(wallTTFT, simTTFT Num, scale float64) Num {
	if !wallTTFT.Valid() || !simTTFT.Valid() || !(scale > 0) {
		return NaN
	}
	outside := max(float64(wallTTFT)-float64(simTTFT)/scale, 0)
	return simTTFT + Num(outside)
}
