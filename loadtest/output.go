package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/loadtest/internal/report"
	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

// outputs are the files a command writes.
type outputs struct {
	json, records, html, table string
}

func (o *outputs) registerFlags(fs *flag.FlagSet, base string) {
	fs.StringVar(&o.json, "out", base+".json", "summary JSON (workloads.<workload>.<strategy>); empty or - for none")
	fs.StringVar(&o.records, "records", "", "per-request JSON lines (default: the --out path with .requests.jsonl); - for none")
	fs.StringVar(&o.html, "html", "", "HTML report (default: the --out path with .html); - for none")
	fs.StringVar(&o.table, "table", "", "also write the Markdown table to this file")
}

// resolve fills the defaults derived from --out.
func (o *outputs) resolve() {
	if o.json == "-" {
		o.json = "" // as for --records and --html, not a file named "-"
	}
	stem := o.json
	if ext := filepath.Ext(stem); ext == ".json" {
		stem = stem[:len(stem)-len(ext)]
	}
	if o.records == "" && stem != "" {
		o.records = stem + ".requests.jsonl"
	}
	if o.html == "" && stem != "" {
		o.html = stem + ".html"
	}
	if o.html == "-" {
		o.html = ""
	}
	if o.records == "-" {
		o.records = ""
	}
}

// openRecords creates the records file (nil writer for none).
func (o *outputs) openRecords() (io.Writer, func() error, error) {
	if o.records == "" {
		return nil, func() error { return nil }, nil
	}
	if err := os.MkdirAll(filepath.Dir(o.records), 0o755); err != nil {
		return nil, nil, fmt.Errorf("records: %w", err)
	}
	f, err := os.Create(o.records)
	if err != nil {
		return nil, nil, fmt.Errorf("records: %w", err)
	}
	return f, f.Close, nil
}

// write writes the JSON, table and HTML and prints the table to stdout.
func (o *outputs) write(f *results.File, stdout io.Writer, title string) error {
	var errs []error
	if o.json != "" {
		errs = append(errs, writeFile(o.json, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(f)
		}))
	}
	if o.table != "" {
		errs = append(errs, writeFile(o.table, func(w io.Writer) error { return report.WriteTable(w, f) }))
	}
	if o.html != "" {
		errs = append(errs, writeFile(o.html, func(w io.Writer) error { return report.WriteHTML(w, f, title) }))
	}
	errs = append(errs, report.WriteTable(stdout, f))
	return errors.Join(errs...)
}

func writeFile(path string, fn func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fn(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newLogger(w io.Writer) zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05"}).With().Timestamp().Logger()
}

// parse parses flags, printing errors; ok false means exit with code.
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}
