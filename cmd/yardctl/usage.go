package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// usageFormat is usage's -o: the online commands' two, and csv.
type usageFormat string

func (o *usageFormat) String() string { return string(*o) }

func (o *usageFormat) Set(v string) error {
	switch v {
	case "table", "json", "csv":
		*o = usageFormat(v)
		return nil
	}
	return errors.New("want table, json or csv")
}

// runUsage asks the meter's usage API (GET /v1/usage) for a tenant's
// usage and prints it.
func runUsage(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	meterURL := fs.String("meter", "http://127.0.0.1:9096", "meter base URL (its --http-addr)")
	tenant := fs.String("tenant", "", "the tenant (required)")
	since := fs.String("since", "", "how far back: 90m, 24h, 30d (default 24h; or --from)")
	from := fs.String("from", "", "start of the range, RFC 3339 (instead of --since)")
	to := fs.String("to", "", "end of the range, RFC 3339 (default now)")
	by := fs.String("by", "", "one row per model, minute, hour or day (default: one total)")
	output := usageFormat("table")
	fs.Var(&output, "o", "output `format`: table for people, json (the meter's answer) or csv for machines")
	var hf httpFlags
	hf.register(fs, "meter")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *tenant == "" {
		return errors.New("--tenant is required")
	}
	if _, err := usage.ParseBy(*by); err != nil {
		return fmt.Errorf("--by: %w", err)
	}
	q := url.Values{"tenant": {*tenant}}
	for k, v := range map[string]string{"since": *since, "from": *from, "to": *to, "by": *by} {
		if v != "" {
			q.Set(k, v)
		}
	}
	raw, err := hf.call(ctx, http.MethodGet, strings.TrimRight(*meterURL, "/")+"/v1/usage?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if output == "json" {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("the meter's answer is not JSON: %w", err)
		}
		b.WriteByte('\n')
		_, err := stdout.Write(b.Bytes())
		return err
	}
	var a usage.Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("read the meter's answer: %w", err)
	}
	if output == "csv" {
		return usageCSV(stdout, &a)
	}
	return usageTable(stdout, &a)
}

// usageTable prints one line per row, then the total.
func usageTable(w io.Writer, a *usage.Answer) error {
	fmt.Fprintf(w, "Tenant %s, %s to %s (UTC)\n\n", a.Tenant, a.From.UTC().Format("2006-01-02 15:04"), a.To.UTC().Format("2006-01-02 15:04"))
	first := "MODEL"
	if usage.Window(a.By) > 0 {
		first = strings.ToUpper(a.By)
	}
	head := []string{"REQUESTS", "OK", "NOT OK", "INPUT CACHED", "INPUT UNCACHED", "OUTPUT", "TTFT MEAN", "E2E MEAN"}
	rows := [][]string{}
	if a.By != usage.ByTotal {
		rows = append(rows, append([]string{first}, head...))
		for _, r := range a.Rows {
			rows = append(rows, append([]string{rowName(a.By, &r)}, usageCells(&r)...))
		}
		rows = append(rows, append([]string{"TOTAL"}, usageCells(&a.Total)...))
	} else {
		rows = append(rows, head, usageCells(&a.Total))
	}
	return writeTable(w, "", rows)
}

func rowName(by string, r *usage.Row) string {
	switch by {
	case usage.ByModel:
		return r.Model
	case usage.ByDay:
		return r.Start.UTC().Format("2006-01-02")
	}
	return r.Start.UTC().Format("2006-01-02 15:04")
}

func usageCells(r *usage.Row) []string {
	ok := r.Outcomes[bus.UsageOutcomeOK]
	return []string{
		itoa(r.Requests), itoa(ok), itoa(r.Requests - ok), itoa(r.CachedInput), itoa(r.UncachedInput), itoa(r.Output),
		mean(r.TTFTMean), mean(r.E2EMean),
	}
}

// mean is a mean duration, "-" without one.
func mean(s float64) string {
	if s == 0 {
		return "-"
	}
	return seconds(s)
}

// usageCSV prints a header and one line per row (no total: a spreadsheet
// sums), every outcome a column.
func usageCSV(w io.Writer, a *usage.Answer) error {
	cw := csv.NewWriter(w)
	head := []string{"tenant", "start", "end", "model", "requests", "cached_input_tokens", "uncached_input_tokens", "output_tokens", "reasoning_tokens", "ttft_mean_seconds", "e2e_mean_seconds"}
	for _, o := range bus.UsageOutcomes {
		head = append(head, "outcome_"+o)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range a.Rows {
		rec := []string{a.Tenant, r.Start.UTC().Format(time.RFC3339), r.End.UTC().Format(time.RFC3339), r.Model,
			itoa(r.Requests), itoa(r.CachedInput), itoa(r.UncachedInput), itoa(r.Output), itoa(r.Reasoning),
			strconv.FormatFloat(r.TTFTMean, 'f', -1, 64), strconv.FormatFloat(r.E2EMean, 'f', -1, 64)}
		for _, o := range bus.UsageOutcomes {
			rec = append(rec, itoa(r.Outcomes[o]))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
