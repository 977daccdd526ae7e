package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

func reportCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadtest report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "bench/routing.json", "result JSON to render")
	var out outputs
	fs.StringVar(&out.html, "html", "", "write the HTML report here (empty or -: none)")
	fs.StringVar(&out.table, "table", "", "write the Markdown table here (empty or -: none)")
	title := fs.String("title", "Switchyard routing benchmark", "report title")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	// "-" is none, as for run's outputs: not a file named "-".
	for _, p := range []*string{&out.html, &out.table} {
		if *p == "-" {
			*p = ""
		}
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest report: %v\n", err)
		return 1
	}
	var f results.File
	if err := json.Unmarshal(b, &f); err != nil {
		fmt.Fprintf(stderr, "loadtest report: %s: %v\n", *in, err)
		return 1
	}
	if f.Schema != results.Schema {
		fmt.Fprintf(stderr, "loadtest report: %s: schema %q, want %q\n", *in, f.Schema, results.Schema)
		return 1
	}
	if err := out.write(&f, stdout, *title); err != nil {
		fmt.Fprintf(stderr, "loadtest report: %v\n", err)
		return 1
	}
	return 0
}
