package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/switchyard-dev/switchyard/internal/version"
)

// runVersion is `yardctl version`.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	_, err := fmt.Fprintln(stdout, "yardctl", version.Get())
	return err
}
