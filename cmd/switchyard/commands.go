package main

import (
	"context"
	"flag"
	"io"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/devenv"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/meter"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/router"
)

// service is what every services/<name> package offers.
type service[C any] interface {
	*C
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
}

// serviceCommand adapts a service package to a command.
func serviceCommand[C any, P service[C]](name, summary string, runSvc func(context.Context, C, zerolog.Logger) error) command {
	return command{
		name:    name,
		summary: summary,
		setup: func(fs *flag.FlagSet) (func() error, runFunc) {
			var cfg C
			P(&cfg).RegisterFlags(fs)
			return P(&cfg).Validate, func(ctx context.Context, log zerolog.Logger) error {
				return runSvc(ctx, cfg, log)
			}
		},
	}
}

func commands(stdout io.Writer) []command {
	return []command{
		{
			name:    "dev",
			summary: "everything in one process: embedded NATS, policyd on deploy/examples, simulated vLLM workers and providers, kvtracker, router, gateway",
			setup: func(fs *flag.FlagSet) (func() error, runFunc) {
				var cfg devenv.Config
				cfg.RegisterFlags(fs)
				return cfg.Validate, func(ctx context.Context, log zerolog.Logger) error {
					return devenv.Run(ctx, cfg, log, stdout)
				}
			},
		},
		serviceCommand[sim.Config]("sim", "simulated vLLM workers (OpenAI API, vLLM metrics and KV events, engine model)", sim.Run),
		serviceCommand[gateway.Config]("gateway", "OpenAI-compatible HTTP gateway: routes, proxies, streams and meters requests", gateway.Run),
		serviceCommand[router.Config]("router", "gRPC router: picks the worker or provider for each request", router.Run),
		serviceCommand[kvtracker.Config]("kvtracker", "ingests vLLM KV cache events, publishes block deltas and snapshots for routers", kvtracker.Run),
		serviceCommand[policyd.Config]("policyd", "validates, compiles and serves routing policies (files or Kubernetes CRDs)", policyd.Run),
		serviceCommand[meter.Config]("meter", "counts usage per tenant and model exactly once: rollups, metrics, tenant feeds, the usage API", meter.Run),
	}
}
