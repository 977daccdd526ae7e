package runner

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/loadtest/internal/fakeoai"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
	"github.com/switchyard-dev/switchyard/loadtest/internal/workload"
)

// Constant arrivals are exactly 1/rate apart, the first at 0.
func TestConstantSchedule(t *testing.T) {
	s := NewSchedule(Constant, 4, 1)
	for k := range 1000 {
		if got, want := s.Next(), float64(k)/4; math.Abs(got-want) > 1e-9 {
			t.Fatalf("arrival %d at %v, want %v", k, got, want)
		}
	}
}

// Poisson gaps are exponential: mean 1/rate and variance 1/rate², within
// a few standard errors for a fixed seed; the same seed gives the same
// arrivals and another seed others.
func TestPoissonSchedule(t *testing.T) {
	const rate, n = 2.5, 20000
	s := NewSchedule(Poisson, rate, 42)
	if first := s.Next(); first != 0 {
		t.Fatalf("first arrival at %v, want 0", first)
	}
	prev := 0.0
	gaps := make([]float64, n)
	sum := 0.0
	for i := range gaps {
		at := s.Next()
		gaps[i] = at - prev
		if gaps[i] < 0 {
			t.Fatalf("arrival %d before the previous one", i)
		}
		prev = at
		sum += gaps[i]
	}
	mean := sum / n
	v := 0.0
	for _, g := range gaps {
		v += (g - mean) * (g - mean)
	}
	v /= n - 1
	// Standard error of the mean 1/(rate·√n) ≈ 0.0028; of the variance
	// of an exponential about √(8/n)/rate² ≈ 0.0032. Allow ~4 of each.
	if want := 1 / rate; math.Abs(mean-want) > 0.012 {
		t.Errorf("mean gap %v, want %v", mean, want)
	}
	if want := 1 / (rate * rate); math.Abs(v-want) > 0.013 {
		t.Errorf("gap variance %v, want %v", v, want)
	}
	a, b, c := NewSchedule(Poisson, rate, 7), NewSchedule(Poisson, rate, 7), NewSchedule(Poisson, rate, 8)
	same, other := true, false
	for range 100 {
		x, y, z := a.Next(), b.Next(), c.Next()
		same = same && x == y
		other = other || x != z
	}
	if !same || !other {
		t.Errorf("same seed reproduced: %v; another seed differed: %v", same, other)
	}
}

// An open loop keeps its clock when the server stalls: arrivals beyond
// the bound are counted and not sent, and the scheduler never waits for a
// completion.
func TestInFlightBound(t *testing.T) {
	for _, mode := range []Mode{Constant, Poisson} {
		t.Run(string(mode), func(t *testing.T) {
			release := make(chan struct{})
			var served atomic.Int64
			e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
				served.Add(1)
				<-release // every request hangs until the run's arrivals are over
				return fakeoai.Echo(r)
			})
			gen, _ := workload.NewGenerator(smallSpec(workload.Control))
			p := plan(mode, workload.Control)
			// 100 arrivals per model second at time scale 10 for 2 model
			// seconds: ~200 arrivals in 0.2 s of wall, 3 allowed in flight.
			p.Rate, p.Concurrency, p.Requests, p.Duration = 100, 3, 0, 2*time.Second
			go func() {
				time.Sleep(400 * time.Millisecond)
				close(release)
			}()
			out, err := Execute(context.Background(), p, []Tenant{{Client: e.env.Client, Gen: gen, Concurrency: p.Concurrency, Rate: p.Rate, Seed: 1}}, e.env)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Open) != 1 {
				t.Fatalf("open-loop counts %+v", out.Open)
			}
			o := out.Open[0]
			if o.Sent != 3 || len(out.Records) != 3 || o.MaxInFlight != 3 || o.PeakInFlight != 3 {
				t.Errorf("sent %d, %d records, bound %d, peak %d: want 3 of each", o.Sent, len(out.Records), o.MaxInFlight, o.PeakInFlight)
			}
			// The scheduler kept its clock: about 200 arrivals came
			// (constant: exactly those before 2 s), all but 3 over the bound.
			if o.Arrivals < 150 || o.Arrivals > 260 || o.OverBound != o.Arrivals-o.Sent {
				t.Errorf("%d arrivals, %d over the bound, %d sent", o.Arrivals, o.OverBound, o.Sent)
			}
			// 200 are due; a scheduler delayed past the end by a loaded
			// machine sees a few fewer.
			if mode == Constant && (o.Arrivals < 180 || o.Arrivals > 200) {
				t.Errorf("constant: %d arrivals in 2 model seconds at 100/s", o.Arrivals)
			}
			for _, r := range out.Records {
				if r.Rate != 100 || r.Concurrency != 0 || !r.OK() {
					t.Errorf("record %+v", r)
				}
			}
		})
	}
}

// Without a stall, arrivals are sent on schedule: start times follow the
// constant spacing, not the completions.
func TestOpenLoopStartsOnSchedule(t *testing.T) {
	e := newEnv(t, 1, results.Direct, func(r fakeoai.Request) fakeoai.Script {
		sc := fakeoai.Echo(r)
		sc.Gap = 100 * time.Millisecond // three chunks: each answer takes ≥ 200 ms of wall
		return sc
	})
	gen, _ := workload.NewGenerator(smallSpec(workload.Control))
	p := plan(Constant, workload.Control)
	p.Rate, p.Concurrency, p.Requests = 50, 0, 10 // one every 2 ms of wall
	out, err := Execute(context.Background(), p, []Tenant{{Client: e.env.Client, Gen: gen, Rate: p.Rate, Seed: 1}}, e.env)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != 10 || out.Open[0].OverBound != 0 || out.Open[0].MaxInFlight != DefaultMaxInFlight {
		t.Fatalf("%d records, counts %+v", len(out.Records), out.Open)
	}
	last := 0.0
	for _, r := range out.Records {
		last = max(last, r.StartS)
	}
	// Ten arrivals 0.02 model seconds apart: the last starts near 0.18,
	// long before the first answer (≥ 2 model seconds) came back.
	if last > 1 {
		t.Errorf("last request started at %v model seconds: arrivals waited for completions", last)
	}
	if peak := out.Open[0].PeakInFlight; peak < 5 {
		t.Errorf("peak in flight %d: the loop did not overlap requests", peak)
	}
}
