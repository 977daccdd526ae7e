package ratesweep

import (
	"flag"
	"io"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

func TestRates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		sat  float64
		want []float64
	}{
		{"defaults", DefaultConfig(), 2.5, []float64{0.5, 1, 1.5, 2, 2.5}},
		{"evenly spaced, rounded to 3 figures", Config{Points: 4, Low: 0.1, High: 1}, 1.2345, []float64{0.123, 0.494, 0.864, 1.23}},
		{"one point is the high end", Config{Points: 1, Low: 0.2, High: 0.9}, 10, []float64{9}},
		{"above saturation", Config{Points: 3, Low: 0.5, High: 1.5}, 2, []float64{1, 2, 3}},
		{"rounding merges equal rates", Config{Points: 3, Low: 0.9999, High: 1}, 1, []float64{1}},
		{"no saturation rate", DefaultConfig(), math.NaN(), nil},
		{"zero saturation rate", DefaultConfig(), 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.Rates(tc.sat); !slices.Equal(got, tc.want) {
				t.Errorf("Rates(%v) = %v, want %v", tc.sat, got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := Config{Points: 0, Low: 0.5, High: 0.2, Concurrency: 0}
	err := bad.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"rate-points 0", "rate-low 0.5 above rate-high 0.2", "saturation-concurrency 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, c := range []Config{
		{Points: 3, Low: 0.5, High: 0.5, Concurrency: 8},
		{Points: 3, Low: -1, High: 1, Concurrency: 8},
		{Points: 3, Low: 0.1, High: 11, Concurrency: 8},
		{Points: 101, Low: 0.1, High: 1, Concurrency: 8},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := DefaultConfig()
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--rate-points", "3", "--rate-low", "0.5", "--rate-high", "0.9", "--saturation-concurrency", "64"}); err != nil {
		t.Fatal(err)
	}
	if c != (Config{Points: 3, Low: 0.5, High: 0.9, Concurrency: 64}) {
		t.Errorf("flags gave %+v", c)
	}
}

func rec(session int, start, end float64, ok bool) results.Record {
	r := results.Record{Session: session, StartWallS: start, EndWallS: end}
	if !ok {
		r.Error = "boom"
	}
	return r
}

// A closed loop of 2 clients, each request 1 s of wall: the loop is full
// from the first answer (1 s) to the last request sent (4 s), in which 6
// answers came: 2 per wall second, 0.2 per model second at time scale 10
// (model time runs 10× the wall). The ramp-down answer at 5 s is left out.
func TestMeasure(t *testing.T) {
	var recs []results.Record
	for k := range 5 {
		recs = append(recs, rec(2*k, float64(k), float64(k+1), true), rec(2*k+1, float64(k), float64(k+1), true))
	}
	recs = recs[:9] // the last request sent at 4 s ends at 5 s
	got := Measure(recs, 10, "round-robin", 2)
	if got.Window != "full" || math.Abs(float64(got.RequestsPerS)-0.2) > 1e-9 || math.Abs(float64(got.Rate)-0.2) > 1e-9 {
		t.Errorf("single-turn: %+v, want 0.2 requests and sessions per second over the full window", got)
	}
	if got.Strategy != "round-robin" || got.Concurrency != 2 || got.Requests != 9 {
		t.Errorf("labels %+v", got)
	}
	// Multi-turn: three turns per session make a third of the rate in
	// sessions per second; a failed request does not count as served.
	for i := range recs {
		recs[i].Session /= 3
	}
	recs[3].Error = "refused"
	got = Measure(recs, 10, "round-robin", 2)
	if want := 5.0 / 30; math.Abs(float64(got.RequestsPerS)-want) > 1e-9 {
		t.Errorf("requests per second %v, want %v", got.RequestsPerS, want)
	}
	if want := 5.0 / 30 * 3 / 9; math.Abs(float64(got.Rate)-want) > 1e-9 {
		t.Errorf("sessions per second %v, want %v", got.Rate, want)
	}
	// A run too short for a full window falls back to the whole run.
	got = Measure([]results.Record{rec(0, 0, 2, true)}, 10, "round-robin", 1)
	if got.Window != "run" || math.Abs(float64(got.RequestsPerS)-0.05) > 1e-9 {
		t.Errorf("one request: %+v", got)
	}
	if got := Measure(nil, 10, "round-robin", 1); got.Rate.Valid() {
		t.Errorf("no records: %+v", got)
	}
}

func TestParseArrivals(t *testing.T) {
	for _, s := range []string{"constant", "poisson"} {
		if m, err := ParseArrivals(s); err != nil || string(m) != s {
			t.Errorf("%s: %v %v", s, m, err)
		}
	}
	if _, err := ParseArrivals("concurrent"); err == nil {
		t.Error("concurrent accepted as an arrival process")
	}
}
