package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-dev/switchyard/loadtest/internal/compare"
)

func compareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg compare.Config
	cfg.RegisterFlags(fs)
	var out outputs
	out.registerFlags(fs, "bench/routing")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: loadtest compare [flags]

Starts a simulated fleet (switchyard sim) and runs the same seeded workloads
under each routing strategy, restarting the fleet before every run: random,
round-robin, least-queue and oracle pick workers inside the load generator;
switchyard goes through the real router and gateway (switchyard dev
--endpoints). Writes the summary JSON, per-request records, an HTML report
and prints a table with ratios against random and the gap to oracle.

--load concurrency (the default) runs closed loops at the --sweep levels;
--load rate runs open loops at the --rates; --load rate-sweep measures each
workload's saturation rate once (a closed loop of --saturation-strategy) and
runs every strategy at --rate-points rates below it. Open-loop arrivals come
on the clock (--arrivals constant or poisson), never waiting for answers.
There the goodput headline is each strategy's highest offered rate within
the SLO, and the bar checks switchyard on control against the better of
round-robin and least-queue at every rate. --repeat repeats every level or
rate (not the saturation run) and reports medians.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	cfg.Parsed(fs)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "loadtest compare: invalid configuration: %v\n", err)
		return 2
	}
	out.resolve()
	log := newLogger(stderr)
	recs, closeRecs, err := out.openRecords()
	if err != nil {
		log.Error().Err(err).Msg("exit")
		return 1
	}
	f, err := compare.Run(ctx, cfg, compare.Output{Records: recs, Status: stderr}, log)
	if cerr := closeRecs(); err == nil {
		err = cerr
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			log.Warn().Msg("interrupted")
			return 130
		}
		log.Error().Err(err).Msg("exit")
		return 1
	}
	if err := out.write(f, stdout, "Switchyard routing benchmark"); err != nil {
		log.Error().Err(err).Msg("exit")
		return 1
	}
	log.Info().Str("json", out.json).Str("html", out.html).Str("records", out.records).Msg("results written")
	return 0
}
