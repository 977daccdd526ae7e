package engine

import (
	"context"
	"sync"
	"time"
)

// Clock is the engine's model time, as a duration since the engine's start.
// It is integer nanoseconds so that step arithmetic is exact: the same steps
// give the same TTFT whatever the arrival instant. The engine prices steps
// in model time and asks the clock to wait for a step's end; how long that
// takes on the wall is the clock's business.
type Clock interface {
	Now() time.Duration
	// WaitUntil returns once model time t is reached (or ctx is done).
	WaitUntil(ctx context.Context, t time.Duration) error
}

// StopClock is a Clock that can stop the engine as a stopped process is
// stopped (SIGSTOP, a frozen VM, a GPU reset): model time goes on, as wall
// time does, but the engine sees nothing until it resumes. A step that
// ends during a stop ends, for the engine, when it resumes: its tokens are
// delivered then and the next step starts then.
type StopClock interface {
	Clock
	// WaitStopped blocks while the clock is stopped (or until ctx is
	// done) and returns the model time it resumed at, 0 when it was not
	// stopped.
	WaitStopped(ctx context.Context) (time.Duration, error)
}

// ScaledClock runs model time scale times faster than the wall clock.
//
// Accuracy. The engine's model time never depends on wall-clock jitter
// (see state.schedule), but arrival times are read from this clock, and a
// wall sleep shorter than the timer's resolution (about 1 ms on Linux) is
// not attempted: the engine runs up to that far ahead of the wall instead.
// A request arriving then joins the step after the one it would have
// joined, so its TTFT is overstated by at most about scale × 1 ms of model
// time: under 10 ms at scale 10 (a third of a decode step), but a second at
// scale 1000. Use small scales for latency benchmarks and large ones for
// functional tests. The engine's own compute is not the limit
// (BenchmarkStep*: tens of thousands of model seconds per wall second).
type ScaledClock struct {
	start time.Time
	scale float64
}

// NewScaledClock starts a clock at model time 0. scale must be positive.
func NewScaledClock(scale float64) *ScaledClock {
	return &ScaledClock{start: time.Now(), scale: scale}
}

// Now implements Clock.
func (c *ScaledClock) Now() time.Duration {
	return time.Duration(float64(time.Since(c.start)) * c.scale)
}

// minSleep is below the wall timer's resolution (about a millisecond on
// Linux): a shorter sleep would overshoot by more than it waits. The engine
// runs ahead instead, and the next, longer, sleep realigns it.
const minSleep = time.Millisecond

// WaitUntil implements Clock.
func (c *ScaledClock) WaitUntil(ctx context.Context, t time.Duration) error {
	wall := c.start.Add(time.Duration(float64(t) / c.scale))
	d := time.Until(wall)
	if d < minSleep {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ManualClock is a clock for tests: time moves only when told, and waiting
// jumps to the target at once, so steps cost no wall time.
type ManualClock struct {
	mu sync.Mutex
	t  time.Duration
}

// Now implements Clock.
func (c *ManualClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves time forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t += d
}

// WaitUntil implements Clock.
func (c *ManualClock) WaitUntil(ctx context.Context, t time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t > c.t {
		c.t = t
	}
	return ctx.Err()
}
