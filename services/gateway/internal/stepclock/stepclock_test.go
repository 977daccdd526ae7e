package stepclock

import (
	"math"
	"sync"
	"testing"
	"time"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

func byEndpoint(cs []*routerv1.StepClock) map[string]*routerv1.StepClock {
	m := map[string]*routerv1.StepClock{}
	for _, c := range cs {
		m[c.GetEndpointId()] = c
	}
	return m
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-9 }

func TestClocks(t *testing.T) {
	var c Clocks
	t0 := time.Unix(1000, 0)
	ms := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }

	if got := c.Append(nil, t0); len(got) != 0 {
		t.Fatalf("an empty set reports %v", got)
	}
	// The first read of a worker: when its step ended, its length unknown.
	c.Tick("w0", ms(0))
	got := byEndpoint(c.Append(nil, ms(5)))
	if k := got["w0"]; k == nil || !near(k.GetSinceStepSeconds(), 0.005) || k.GetStepSeconds() != 0 {
		t.Fatalf("after one read: %v", k)
	}
	// Five streams' reads of one step, spread by 0.2 ms: one step end, at
	// the first read.
	for i := range 5 {
		c.Tick("w0", ms(0.04*float64(i)))
	}
	// The next step's reads, 50 ms later, spread the same way.
	for i := range 5 {
		c.Tick("w0", ms(50+0.04*float64(i)))
	}
	got = byEndpoint(c.Append(nil, ms(60)))
	if k := got["w0"]; !near(k.GetStepSeconds(), 0.050) || !near(k.GetSinceStepSeconds(), 0.010) {
		t.Fatalf("after two steps: step %v since %v, want 0.05 and 0.01", k.GetStepSeconds(), k.GetSinceStepSeconds())
	}
	// A straggler of the last step, later than MinGap but within a quarter
	// of a step, is the same step.
	c.Tick("w0", ms(51))
	got = byEndpoint(c.Append(nil, ms(60)))
	if k := got["w0"]; !near(k.GetStepSeconds(), 0.050) || !near(k.GetSinceStepSeconds(), 0.010) {
		t.Fatalf("a straggler moved the clock: step %v since %v", k.GetStepSeconds(), k.GetSinceStepSeconds())
	}
	// A read out of order (before the last step) changes nothing.
	c.Tick("w0", ms(10))
	if k := byEndpoint(c.Append(nil, ms(60)))["w0"]; !near(k.GetStepSeconds(), 0.050) {
		t.Fatalf("a read out of order moved the clock: %v", k)
	}
	// Steps that prefilled a long prompt are not the length of the next:
	// the shortest of the last Window steps is.
	end := 50.0
	for i := range Window - 1 {
		end += 200
		c.Tick("w0", ms(end))
		if k := byEndpoint(c.Append(nil, ms(end)))["w0"]; !near(k.GetStepSeconds(), 0.050) || k.GetSinceStepSeconds() != 0 {
			t.Fatalf("after %d 200 ms steps: %v, want the 50 ms one before them", i+1, k)
		}
	}
	// Window long steps in a row are the worker's pace.
	end += 200
	c.Tick("w0", ms(end))
	if k := byEndpoint(c.Append(nil, ms(end)))["w0"]; !near(k.GetStepSeconds(), 0.200) {
		t.Fatalf("after %d 200 ms steps: %v", Window, k)
	}
	// After a silence longer than MaxStep the worker had nothing running:
	// the step's length is unknown.
	after := end + float64(MaxStep+time.Millisecond)/float64(time.Millisecond)
	c.Tick("w0", ms(after))
	if k := byEndpoint(c.Append(nil, ms(after)))["w0"]; k.GetStepSeconds() != 0 {
		t.Fatalf("a silence of MaxStep was taken as a step: %v", k)
	}
	// Workers are independent, and one silent for Stale is forgotten.
	c.Tick("w1", ms(after))
	c.Tick("w1", ms(after+30))
	got = byEndpoint(c.Append(nil, ms(after+30)))
	if len(got) != 2 || !near(got["w1"].GetStepSeconds(), 0.030) || got["w0"].GetStepSeconds() != 0 {
		t.Fatalf("two workers: %v", got)
	}
	stale := after + 30 + float64(Stale+time.Millisecond)/float64(time.Millisecond)
	c.Tick("w1", ms(stale))
	got = byEndpoint(c.Append(nil, ms(stale)))
	if len(got) != 1 || got["w1"] == nil {
		t.Fatalf("a worker silent for Stale is still reported: %v", got)
	}
	held := 0
	c.byEP.Range(func(any, any) bool { held++; return true })
	if held != 1 {
		t.Fatalf("the stale worker was not forgotten: %d clocks held", held)
	}
}

// Ticks and reads from many streams at once (run with -race).
func TestClocksConcurrent(t *testing.T) {
	var c Clocks
	t0 := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep := []string{"w0", "w1"}[g%2]
			for i := range 1000 {
				c.Tick(ep, t0.Add(time.Duration(i)*time.Millisecond))
				if i%100 == 0 {
					c.Append(nil, t0.Add(time.Duration(i)*time.Millisecond))
				}
			}
		}()
	}
	wg.Wait()
	got := byEndpoint(c.Append(nil, t0.Add(time.Second)))
	if len(got) != 2 || !near(got["w0"].GetStepSeconds(), 0.001) {
		t.Fatalf("after concurrent ticks a millisecond apart: %v", got)
	}
}
