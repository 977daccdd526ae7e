// Package ratesweep spreads open-loop rates below a fleet's saturation
// rate, the way GuideLLM's sweep profile does: find the highest rate the
// fleet sustains, then measure at evenly spaced rates below it.
//
// GuideLLM's sweep runs a synchronous benchmark (one request at a time) and
// a throughput benchmark (every request at once) and takes the requests
// per second each achieved as the ends of its range; the rest of its
// benchmarks run at constant (or Poisson) rates spread evenly between the
// two. Ours differs in the two ends, for reasons of cost and of load:
//
//   - The top end, the saturation rate, comes from a closed loop at a high
//     concurrency (Config.Concurrency, far above what the fleet batches),
//     not from sending every request at once: on a fleet of a few simulated
//     workers, thousands of requests in flight measure the client and the
//     simulator's queues, not the fleet. It is the successful requests per
//     model second while the loop was full — from the first answer to the
//     last request sent, when every client had a request in flight —
//     which leaves out the ramp-up and the drain that would pull a whole-run
//     average below the fleet's rate. Divided by the requests per session
//     it is in sessions per second, the unit of the open-loop rates.
//   - The bottom end is a fraction of it (Config.Low) instead of a
//     synchronous run: a synchronous run of 8k-token prompts costs as much
//     wall time as the rest of the sweep, and a fleet at a fifth of its
//     capacity already shows the unloaded latencies.
//
// Rates are Low·S, …, High·S in Points even steps (S the saturation
// rate), rounded to three significant figures so that tables and
// re-runs can quote them. High defaults to 1: the saturation rate itself,
// where an open loop's queue stops draining and the strategies differ
// most.
package ratesweep

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/runner"
)

// Config is a rate sweep.
type Config struct {
	// Points is how many rates are measured.
	Points int
	// Low and High are the lowest and highest rate as fractions of the
	// saturation rate.
	Low, High float64
	// Concurrency is the saturation run's clients.
	Concurrency int
}

// Defaults.
const (
	DefaultPoints      = 5
	DefaultLow         = 0.2
	DefaultHigh        = 1.0
	DefaultConcurrency = 32
)

// DefaultConfig is the default sweep.
func DefaultConfig() Config {
	return Config{Points: DefaultPoints, Low: DefaultLow, High: DefaultHigh, Concurrency: DefaultConcurrency}
}

// RegisterFlags registers the sweep's flags, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Points, "rate-points", c.Points, "rate sweep: how many offered rates to measure, evenly spaced from --rate-low to --rate-high times the saturation rate")
	fs.Float64Var(&c.Low, "rate-low", c.Low, "rate sweep: the lowest rate, as a fraction of the saturation rate")
	fs.Float64Var(&c.High, "rate-high", c.High, "rate sweep: the highest rate, as a fraction of the saturation rate (1: the saturation rate itself)")
	fs.IntVar(&c.Concurrency, "saturation-concurrency", c.Concurrency, "rate sweep: clients of the closed-loop run that measures the saturation rate (completed requests per second while every client has one in flight)")
}

// Validate reports every unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.Points < 1 || c.Points > 100 {
		errs = append(errs, fmt.Errorf("rate-points %d: want 1 to 100", c.Points))
	}
	if !(c.Low > 0) || math.IsInf(c.Low, 0) {
		errs = append(errs, fmt.Errorf("rate-low %v: want a positive fraction of the saturation rate", c.Low))
	}
	if !(c.High > 0 && c.High <= 10) {
		errs = append(errs, fmt.Errorf("rate-high %v: want a fraction of the saturation rate in (0, 10]", c.High))
	}
	if c.Low > c.High {
		errs = append(errs, fmt.Errorf("rate-low %v above rate-high %v", c.Low, c.High))
	}
	if c.Points > 1 && c.Low == c.High {
		errs = append(errs, fmt.Errorf("rate-points %d between equal rate-low and rate-high %v: want one point or a range", c.Points, c.Low))
	}
	if c.Concurrency < 1 || c.Concurrency > 1<<16 {
		errs = append(errs, fmt.Errorf("saturation-concurrency %d: want 1 to 65536", c.Concurrency))
	}
	return errors.Join(errs...)
}

// Rates is the sweep's rates below saturation rate sat: Points evenly
// spaced from Low·sat to High·sat (High·sat alone for one point), rounded
// to three significant figures, ascending, without duplicates. None when
// sat is not a positive rate.
func (c Config) Rates(sat float64) []float64 {
	if !(sat > 0) || math.IsInf(sat, 0) {
		return nil
	}
	var out []float64
	for i := range c.Points {
		f := c.High
		if c.Points > 1 {
			f = c.Low + (c.High-c.Low)*float64(i)/float64(c.Points-1)
		}
		if r := Round3(f * sat); r > 0 {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Round3 rounds a positive rate to three significant figures.
func Round3(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return r
}

// Measure estimates the saturation rate from a closed-loop run's
// records (see the package doc); scale converts wall to model seconds.
func Measure(recs []results.Record, scale float64, strategy string, concurrency int) results.Saturation {
	sat := results.Saturation{Strategy: strategy, Concurrency: concurrency, Requests: len(recs),
		RequestsPerS: results.NaN, Rate: results.NaN}
	if len(recs) == 0 || !(scale > 0) {
		return sat
	}
	firstEnd, lastStart := math.Inf(1), math.Inf(-1)
	firstStart, lastEnd := math.Inf(1), math.Inf(-1)
	sessions := map[[2]any]bool{}
	for _, r := range recs {
		firstEnd, lastStart = min(firstEnd, r.EndWallS), max(lastStart, r.StartWallS)
		firstStart, lastEnd = min(firstStart, r.StartWallS), max(lastEnd, r.EndWallS)
		sessions[[2]any{r.Tenant, r.Session}] = true
	}
	inFull, ok := 0, 0
	for _, r := range recs {
		if !r.OK() {
			continue
		}
		ok++
		if r.EndWallS > firstEnd && r.EndWallS <= lastStart {
			inFull++
		}
	}
	switch {
	case lastStart > firstEnd && inFull >= 2:
		sat.RequestsPerS, sat.Window = results.Num(float64(inFull)/((lastStart-firstEnd)*scale)), "full"
	case lastEnd > firstStart && ok > 0:
		sat.RequestsPerS, sat.Window = results.Num(float64(ok)/((lastEnd-firstStart)*scale)), "run"
	default:
		return sat
	}
	sat.Rate = sat.RequestsPerS * results.Num(float64(len(sessions))/float64(len(recs)))
	return sat
}

// Modes are the open-loop arrival processes a sweep can use.
var Modes = []runner.Mode{runner.Constant, runner.Poisson}

// ParseArrivals checks an arrival process name.
func ParseArrivals(s string) (runner.Mode, error) {
	m := runner.Mode(s)
	if !slices.Contains(Modes, m) {
		return "", fmt.Errorf("arrivals %q: want constant or poisson", s)
	}
	return m, nil
}
