// Command switchyard is the one binary of Switchyard's services: a subcommand
// per service, plus `dev` (everything in one process) and `sim` (simulated
// vLLM workers). Flags can also be set from the environment: --nats-url is
// SWITCHYARD_NATS_URL. `switchyard version` and `switchyard completion
// bash|zsh|fish` need no service.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/completion"
	"github.com/switchyard-dev/switchyard/internal/flagenv"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/telemetry"
	"github.com/switchyard-dev/switchyard/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runFunc runs a parsed, validated command.
type runFunc func(ctx context.Context, log zerolog.Logger) error

// command registers its flags on fs and returns what to run once they are
// parsed; validation happens inside the returned function's caller.
type command struct {
	name    string
	summary string
	setup   func(fs *flag.FlagSet) (validate func() error, run runFunc)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands(stdout)
	if len(args) == 0 {
		usage(stdout, cmds)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		usage(stdout, cmds)
		return 0
	case "--version", "-version", "version":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "switchyard %s: unexpected arguments %q\n", args[0], args[1:])
			return 2
		}
		fmt.Fprintln(stdout, "switchyard", version.Get())
		return 0
	case "completion":
		return runCompletion(args[1:], cmds, stdout, stderr)
	}
	var cmd *command
	for i := range cmds {
		if cmds[i].name == args[0] {
			cmd = &cmds[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "switchyard: unknown command %q\n\n", args[0])
		usage(stderr, cmds)
		return 2
	}

	fs, logCfg, validate, runCmd := cmd.flags(stderr)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "switchyard %s: unexpected arguments %q\n", cmd.name, fs.Args())
		return 2
	}
	if err := flagenv.Apply(fs, nil); err != nil {
		fmt.Fprintf(stderr, "switchyard %s: %v\n", cmd.name, err)
		return 2
	}
	log, err := telemetry.NewLogger(*logCfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard %s: %v\n", cmd.name, err)
		return 2
	}
	if err := validate(); err != nil {
		fmt.Fprintf(stderr, "switchyard %s: invalid configuration: %v\n", cmd.name, err)
		return 2
	}
	if cmd.name != "dev" { // dev names each service it runs itself
		log = log.With().Str("service", cmd.name).Logger()
	}
	lifecycle.SetRedisLogger(log)
	if err := runCmd(ctx, log); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("exit")
		return 1
	}
	return 0
}

// flags builds the command's FlagSet, the logging flags every command
// shares and its own, for running it and for completing it.
func (cmd *command) flags(stderr io.Writer) (*flag.FlagSet, *telemetry.LogConfig, func() error, runFunc) {
	fs := flag.NewFlagSet("switchyard "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var logCfg telemetry.LogConfig
	fs.StringVar(&logCfg.Level, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&logCfg.Format, "log-format", "json", "log format: json or console")
	validate, runCmd := cmd.setup(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: switchyard %s [flags]\n\n%s\n\nEvery flag can also be set from the environment: --some-flag is %s.\n\nFlags:\n",
			cmd.name, cmd.summary, flagenv.EnvName("some-flag"))
		fs.PrintDefaults()
	}
	return fs, &logCfg, validate, runCmd
}

func usage(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "switchyard — inference control plane for fleets of vLLM workers")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: switchyard <command> [flags]   (switchyard <command> -h for its flags)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	for _, c := range builtins {
		fmt.Fprintf(w, "  %-10s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Shell completion of commands and flags:")
	fmt.Fprint(w, completion.Install("switchyard"))
}
