// Package lifecycle is how every Switchyard service starts, serves and
// stops. A service is its network face (API: a gRPC server with health and
// reflection, a REST gateway, an HTTP mux with /healthz, /readyz and
// /metrics) and its parts (Components: NATS subscribers, watch loops,
// scrapers), run together by Run.
//
// Stopping is ordered, because the parts serve each other:
//
//  1. not ready: /readyz answers 503 and gRPC health NOT_SERVING, so load
//     balancers and gateways stop sending new work;
//  2. the drain delay: time for them to notice (a Kubernetes endpoint is
//     removed some time after its pod turns unready);
//  3. long-lived streams are ended (Service.EndStreams), then gRPC
//     GracefulStop, bounded by the shutdown timeout, then HTTP shutdown:
//     calls in flight finish, and whatever they still publish goes out,
//     because
//  4. the components stop only now, in reverse order of their start: a
//     publisher outlives the servers whose requests feed it, and a
//     connection (NATS, Redis) outlives everything that uses it.
//
// A component that fails stops the service the same way, and Run returns
// its error.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Component is one long-running part of a service.
type Component struct {
	// Name is used in logs and errors.
	Name string
	// Run works until ctx ends and then returns nil; an error stops the
	// service. Its context is not the service's: it ends only when the
	// component's turn to stop comes.
	Run func(ctx context.Context) error
}

// Service is what Run runs.
type Service struct {
	Name string
	Log  zerolog.Logger
	// API is the service's network face; nil for a service without one.
	API *API
	// Components start in order, and stop in reverse order after the API.
	Components []Component
	// DrainDelay is how long the service stays up, not ready, before it
	// stops its servers.
	DrainDelay time.Duration
	// ShutdownTimeout bounds the graceful stop of the servers, and then of
	// each component.
	ShutdownTimeout time.Duration
	// EndStreams, when set, ends the service's long-lived server streams
	// (policyd's Watch) after the drain delay: GracefulStop waits for every
	// stream, and these would otherwise hold it until the timeout.
	EndStreams func()
}

// Run serves until ctx ends or a component or server fails, then stops in
// order. It returns nil after a clean stop on ctx, else the first error.
func Run(ctx context.Context, s Service) error {
	type running struct {
		name   string
		cancel context.CancelFunc
		done   chan error
	}
	failed := make(chan error, len(s.Components)+2)
	var comps []running
	for _, c := range s.Components {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := running{name: c.Name, cancel: cancel, done: make(chan error, 1)}
		go func() {
			err := c.Run(cctx)
			if err != nil && cctx.Err() == nil {
				failed <- fmt.Errorf("%s: %w", c.Name, err)
			}
			r.done <- err
		}()
		comps = append(comps, r)
	}
	serversDone := make(chan error, 1)
	if s.API != nil {
		go func() {
			err := s.API.serve()
			if err != nil {
				failed <- err
			}
			serversDone <- err
		}()
		s.Log.Info().Str("grpc_addr", s.API.GRPCAddr()).Str("http_addr", s.API.HTTPAddr()).Msg(s.Name + " serving")
	} else {
		serversDone <- nil
	}

	var first error
	select {
	case <-ctx.Done():
	case first = <-failed:
		s.Log.Error().Err(first).Msg("stopping after a failure")
	}

	// 1-3: not ready, drain delay, servers.
	if s.API != nil {
		s.API.setStopping()
		if s.DrainDelay > 0 {
			s.Log.Info().Dur("drain_delay", s.DrainDelay).Msg("not ready; draining")
			time.Sleep(s.DrainDelay)
		}
		if s.EndStreams != nil {
			s.EndStreams()
		}
		s.API.stop(time.Now().Add(s.ShutdownTimeout), s.Log)
	}
	if err := <-serversDone; err != nil && first == nil {
		first = err
	}
	// 4: components, last started first.
	for i := len(comps) - 1; i >= 0; i-- {
		c := comps[i]
		c.cancel()
		select {
		case err := <-c.done:
			if err != nil && first == nil && !errors.Is(err, context.Canceled) {
				first = fmt.Errorf("%s: %w", c.name, err)
			}
		case <-time.After(s.ShutdownTimeout):
			s.Log.Error().Str("component", c.name).Dur("timeout", s.ShutdownTimeout).Msg("component did not stop in time")
			if first == nil {
				first = fmt.Errorf("%s: did not stop within %s", c.name, s.ShutdownTimeout)
			}
		}
	}
	s.Log.Info().Msg(s.Name + " stopped")
	return first
}
