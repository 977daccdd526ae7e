package runner

import (
	"math/rand/v2"
)

// Schedule is an open-loop arrival process: the times at which sessions
// arrive, in model seconds from the run's start, fixed by the mode, the
// rate and the seed alone — never by how fast the server answers. That is
// what makes the load open: a closed loop's next arrival waits for a
// completion, so an overloaded server slows its own load down and hides
// the queue that production traffic (which arrives on its own clock) would
// build.
//
//   - Constant: evenly spaced, one every 1/rate (GuideLLM's constant).
//   - Poisson: exponentially distributed gaps of mean 1/rate, so the count
//     in any window is Poisson (GuideLLM's poisson): the bursts of
//     independent users, which build queues a constant rate of the same
//     mean does not.
//
// The first arrival is at 0.
type Schedule struct {
	mode Mode
	rate float64
	rng  *rand.Rand
	next float64
}

// NewSchedule returns the arrivals of mode (Constant or Poisson) at rate
// per model second; seed fixes Poisson's gaps.
func NewSchedule(mode Mode, rate float64, seed uint64) *Schedule {
	return &Schedule{mode: mode, rate: rate, rng: rand.New(rand.NewPCG(seed, 0xa441a1))}
}

// Next returns the next arrival time, model seconds since the start.
func (s *Schedule) Next() float64 {
	at := s.next
	gap := 1 / s.rate
	if s.mode == Poisson {
		gap = s.rng.ExpFloat64() / s.rate
	}
	s.next += gap
	return at
}
