package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-dev/switchyard/internal/completion"
)

// builtins are the commands that run no service.
var builtins = []completion.Command{
	{Name: "version", Summary: "print the version, commit and Go version (also --version)"},
	{Name: "completion", Summary: "print the completion script for bash, zsh or fish (see below)", Args: completion.Shells},
}

// runCompletion is `switchyard completion SHELL`.
func runCompletion(args []string, cmds []command, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintf(stdout, "Usage: switchyard completion bash|zsh|fish\n\nPrints a script completing switchyard's commands and their flags. To install it:\n%s", completion.Install("switchyard"))
		return 0
	}
	if len(args) != 1 {
		fmt.Fprintf(stderr, "Usage: switchyard completion bash|zsh|fish\n\n%s", completion.Install("switchyard"))
		return 2
	}
	if err := completion.Write(stdout, args[0], program(cmds)); err != nil {
		fmt.Fprintf(stderr, "switchyard completion: %v\n", err)
		return 2
	}
	return 0
}

// program describes switchyard from the FlagSets its commands really run
// with.
func program(cmds []command) completion.Program {
	top := flag.NewFlagSet("switchyard", flag.ContinueOnError)
	top.Bool("version", false, "print the version, commit and Go version")
	top.Bool("help", false, "list the commands")
	p := completion.Program{Name: "switchyard", Flags: top}
	for i := range cmds {
		fs, _, _, _ := cmds[i].flags(io.Discard)
		p.Commands = append(p.Commands, completion.Command{Name: cmds[i].name, Summary: cmds[i].summary, Flags: fs})
	}
	p.Commands = append(p.Commands, builtins...)
	return p
}
