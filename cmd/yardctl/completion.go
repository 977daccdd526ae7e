package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/completion"
)

// runCompletion is `yardctl completion bash|zsh|fish`.
func runCompletion(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl completion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yardctl completion bash|zsh|fish\n\nPrints a script completing yardctl's commands and their flags. To install it:\n%s", completion.Install("yardctl"))
	}
	if probed(fs) {
		return flag.ErrHelp
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	p, err := program(ctx)
	if err != nil {
		return err
	}
	return completion.Write(stdout, fs.Arg(0), p)
}

// flagProbe is the stderr a command is run with to learn its flags: parse
// hands it the command's FlagSet instead of parsing, so nothing runs.
type flagProbe struct {
	io.Writer
	sets []*flag.FlagSet
}

// probed reports whether fs belongs to a probe, and records it there.
// Every command must call it (parse does) before acting on its arguments.
func probed(fs *flag.FlagSet) bool {
	p, ok := fs.Output().(*flagProbe)
	if ok {
		p.sets = append(p.sets, fs)
	}
	return ok
}

// probeArgs reach every FlagSet of a command: explain parses the offline
// set when -f is given and the online one otherwise (runExplainAny).
var probeArgs = [][]string{nil, {"-f"}}

// commandFlags collects the flags of every FlagSet c parses.
func commandFlags(ctx context.Context, c command) (*flag.FlagSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	cancel() // a command that skipped the probe must not get far
	all := flag.NewFlagSet("yardctl "+c.name, flag.ContinueOnError)
	for _, args := range probeArgs {
		probe := &flagProbe{Writer: io.Discard}
		if err := c.run(ctx, args, strings.NewReader(""), io.Discard, probe); !errors.Is(err, flag.ErrHelp) || len(probe.sets) == 0 {
			return nil, fmt.Errorf("%s does not parse its flags with parse(): %v", c.name, err)
		}
		for _, fs := range probe.sets {
			fs.VisitAll(func(f *flag.Flag) {
				if all.Lookup(f.Name) == nil {
					all.Var(f.Value, f.Name, f.Usage)
					all.Lookup(f.Name).DefValue = f.DefValue
				}
			})
		}
	}
	return all, nil
}

// program describes yardctl from the FlagSets its commands really parse.
func program(ctx context.Context) (completion.Program, error) {
	top := flag.NewFlagSet("yardctl", flag.ContinueOnError)
	top.Bool("help", false, "list the commands")
	p := completion.Program{Name: "yardctl", Flags: top}
	for _, c := range commands() {
		fs, err := commandFlags(ctx, c)
		if err != nil {
			return p, err
		}
		cmd := completion.Command{Name: c.name, Summary: c.summary, Flags: fs}
		if c.name == "completion" {
			cmd.Args = completion.Shells
		}
		p.Commands = append(p.Commands, cmd)
	}
	return p, nil
}
