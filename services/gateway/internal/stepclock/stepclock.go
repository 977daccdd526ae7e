// Package stepclock follows the engine steps of the workers a gateway
// streams from, so that the router can tell how much of a worker's current
// step is left when it routes a request there.
//
// vLLM runs steps back to back, and every step emits one token for every
// running request: the tokens of one step reach the gateway together, as
// the streams' reads return within a fraction of a millisecond of each
// other, and the next step's a step later. A read that comes more than a
// quarter of the last step (and at least MinGap) after the last step's
// first read starts a new step; the time between the first reads of two
// steps is the step's length. A request routed to the worker waits for the
// step under way to end before its prefill can start: about a step's
// length less the time since the last one ended. The length reported is
// the shortest of the last Window steps': the steps that prefill long
// prompts (seconds, for 8k tokens) come between decode steps of tens of
// milliseconds. Taken as the length of the next, the last step's (or the
// shorter of the last two, as a prompt over the step's token budget takes
// two) predicted some requests routed after such steps at ten times their
// TTFT and more, at a simulator's ten times real time. The
// prefill that is waiting or under way the router counts itself, from the
// requests it routed. That wait is anything from
// nothing to a whole step (tens of milliseconds on a worker decoding a
// batch) against a TTFT of a couple of hundred milliseconds for a request
// whose prompt is cached, which is why the router wants it.
//
// Times are the gateway's own and are sent relative (seconds since), so no
// clock is shared with the router. A gateway knows only the workers it
// streams from; the router does without a clock for the rest.
package stepclock

import (
	"sync"
	"time"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const (
	// MinGap is the least time between two reads of different steps:
	// the reads of one step's tokens are spread by the gateway's own
	// scheduling, which on a busy machine reaches a few hundred
	// microseconds.
	MinGap = 250 * time.Microsecond
	// MaxStep is the longest time between two step ends still taken as
	// one step: a longer silence is a worker with nothing running, and the
	// step after it has no known length.
	MaxStep = time.Second
	// Window is how many of the last steps the reported length is the
	// shortest of.
	Window = 4
	// Stale is how long after its last step a worker is still reported:
	// the step under way is long over, and saying so (since > step) tells
	// the router nothing is left of it.
	Stale = 2 * time.Second
)

// Clocks holds the step clock of every worker streamed from. The zero
// value is ready to use; it is safe for concurrent use. Every read of
// every stream ticks a clock, so each worker's has its own lock.
type Clocks struct {
	byEP sync.Map // endpoint id → *clock
}

type clock struct {
	mu   sync.Mutex
	last time.Time // first read of the last step
	// steps are the last steps' lengths, the latest at steps[(n-1) %
	// Window]; n counts them since the worker was last silent.
	steps [Window]time.Duration
	n     int
}

// step is the shortest of the last Window steps, 0 when none is known.
func (k *clock) step() time.Duration {
	var s time.Duration
	for i := range min(k.n, Window) {
		if s == 0 || k.steps[i] < s {
			s = k.steps[i]
		}
	}
	return s
}

// Tick records that a read carrying tokens from endpoint returned at at.
func (c *Clocks) Tick(endpoint string, at time.Time) {
	v, ok := c.byEP.Load(endpoint)
	if !ok {
		v, ok = c.byEP.LoadOrStore(endpoint, &clock{last: at})
		if !ok {
			return // the first read: a step's end, its length unknown
		}
	}
	k := v.(*clock)
	k.mu.Lock()
	defer k.mu.Unlock()
	gap := at.Sub(k.last)
	if gap < max(MinGap, k.step()/4) {
		return // the same step's tokens, or a read out of order
	}
	k.last = at
	if gap > MaxStep {
		k.n = 0 // silent: what follows is a new pace
		return
	}
	k.steps[k.n%Window] = gap
	k.n++
}

// Append appends the clocks of the workers with a step ended within Stale
// of now to dst, as seen at now, and forgets the others.
func (c *Clocks) Append(dst []*routerv1.StepClock, now time.Time) []*routerv1.StepClock {
	c.byEP.Range(func(key, v any) bool {
		k := v.(*clock)
		k.mu.Lock()
		since, step := now.Sub(k.last), k.step()
		k.mu.Unlock()
		if since > Stale {
			// A tick racing this loses itself: the worker's next read
			// starts a new clock.
			c.byEP.CompareAndDelete(key, v)
			return true
		}
		dst = append(dst, &routerv1.StepClock{
			EndpointId:       key.(string),
			SinceStepSeconds: max(0, since.Seconds()),
			StepSeconds:      step.Seconds(),
		})
		return true
	})
	return dst
}
