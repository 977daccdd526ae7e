package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// outputFormat is -o of the online commands.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputJSON  outputFormat = "json"
)

func (o *outputFormat) String() string { return string(*o) }

func (o *outputFormat) Set(v string) error {
	switch f := outputFormat(v); f {
	case outputTable, outputJSON:
		*o = f
		return nil
	}
	return errors.New("want table or json")
}

// clock is the time scrape ages are counted to; tests fix it.
var clock = time.Now

// show prints a router's answer: as a table for people, or, with -o json,
// as the router's JSON, indented, for machines. protojson reads the answer
// into msg because it writes 64-bit integers as strings, which a table
// shows as the numbers they are.
func show[M proto.Message](w io.Writer, format outputFormat, raw []byte, msg M, table func(io.Writer, M, time.Time) error) error {
	if format == outputJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return fmt.Errorf("the router's answer is not JSON: %w", err)
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, msg); err != nil {
		return fmt.Errorf("read the router's answer: %w", err)
	}
	return table(w, msg, clock())
}

func endpointsTable(w io.Writer, resp *routerv1.ListEndpointsResponse, now time.Time) error {
	rows := [][]string{{"ID", "KIND", "MODELS", "HEALTHY", "QUEUED", "RUNNING", "IN FLIGHT", "KV", "SCRAPED", "ERROR"}}
	for _, e := range resp.GetEndpoints() {
		healthy := "yes"
		if !e.GetHealthy() {
			healthy = "no"
		}
		rows = append(rows, []string{
			e.GetId(), kindName(e.GetKind()), strings.Join(e.GetModels(), ","), healthy,
			itoa(e.GetWaiting()), itoa(e.GetRunning()), itoa(e.GetInFlight()), kv(e.GetKvCacheUsage()),
			scraped(e, now), e.GetLastError(),
		})
	}
	return writeTable(w, "", rows)
}

func explainTable(w io.Writer, resp *routerv1.ExplainResponse, now time.Time) error {
	var b strings.Builder
	res, d := resp.GetResult(), resp.GetResult().GetDecision()
	line := func(key, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-10s%s\n", key+":", value)
		}
	}
	line("target", target(res))
	line("policy", d.GetPolicy())
	line("rule", d.GetRule())
	if res.GetTarget() != nil {
		line("decision", decision(d))
	}
	line("reason", d.GetReason())
	if ts := resp.GetTokenizer(); ts != nil {
		fmt.Fprintf(&b, "tokenizer: %s: %s\n", ts.GetMode(), ts.GetReason())
		for _, c := range ts.GetChecks() {
			fmt.Fprintf(&b, "  %s: %s", c.GetEndpointId(), c.GetStatus())
			if c.GetDetail() != "" && c.GetStatus() != "match" {
				fmt.Fprintf(&b, " (%s)", c.GetDetail())
			}
			b.WriteByte('\n')
		}
		if n := ts.GetPromptCountMismatches(); n > 0 {
			fmt.Fprintf(&b, "  %d completions counted a different prompt length than the router\n", n)
		}
	}
	b.WriteString("candidates:\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	rows := [][]string{{"ID", "KIND", "MODELS", "QUEUED", "RUNNING", "IN FLIGHT", "KV", "SCRAPED", "TTFT", "SCORE", "CACHED/PROMPT", "RECENT PREDICTED/SEEN", "VERDICT"}}
	for _, c := range resp.GetCandidates() {
		e := c.GetEndpoint()
		ttft, score, cached := "-", "-", "-"
		if c.GetEligible() {
			ttft, score = seconds(c.GetPredictedTtftSeconds()), seconds(c.GetScore())
			cached = itoa(c.GetCachedTokens()) + "/" + itoa(d.GetPromptTokens())
		}
		rows = append(rows, []string{
			e.GetId(), kindName(e.GetKind()), strings.Join(e.GetModels(), ","),
			itoa(c.GetWaiting()), itoa(c.GetRunning()), itoa(c.GetInFlight()), kv(e.GetKvCacheUsage()),
			scraped(e, now), ttft, score, cached, recentAccuracy(e), verdict(c),
		})
	}
	return writeTable(w, "  ", rows)
}

// target is the answer in a line: where the request goes, or why nowhere.
func target(res *routerv1.RouteResponse) string {
	if rej := res.GetRejection(); rej != nil {
		code := strings.TrimPrefix(rej.GetCode().String(), "REJECT_CODE_")
		return fmt.Sprintf("none, rejected (%s): %s", code, rej.GetMessage())
	}
	t := res.GetTarget()
	if t == nil {
		return "none"
	}
	what := kindName(t.GetKind()) + ", model " + t.GetServedModel()
	if t.GetProvider() != "" {
		what += ", " + t.GetProvider()
	}
	return fmt.Sprintf("%s (%s) at %s", t.GetId(), what, t.GetUrl())
}

func decision(d *routerv1.Decision) string {
	s := d.GetStrategy() + ", predicted TTFT " + seconds(d.GetPredictedTtftSeconds())
	if d.GetPromptTokens() == 0 {
		return s + ", no prompt read (give --request to see each worker's cache of it)"
	}
	return fmt.Sprintf("%s, %d of %d prompt tokens cached", s, d.GetCachedTokens(), d.GetPromptTokens())
}

func verdict(c *routerv1.Candidate) string {
	switch {
	case c.GetChosen():
		return "chosen"
	case c.GetEligible():
		return "candidate"
	case c.GetExcludedReason() != "":
		return c.GetExcludedReason()
	}
	return "excluded"
}

// kindName names target kinds as the offline explain does.
func kindName(k routerv1.TargetKind) string {
	switch k {
	case routerv1.TargetKind_TARGET_KIND_LOCAL:
		return "Local"
	case routerv1.TargetKind_TARGET_KIND_PROVIDER:
		return "Provider"
	}
	return "-"
}

// scraped is how long ago the router last read the endpoint's metrics.
// Providers have none to read.
func scraped(e *routerv1.Endpoint, now time.Time) string {
	switch {
	case e.GetKind() == routerv1.TargetKind_TARGET_KIND_PROVIDER:
		return "-"
	case e.GetLastScrape() == nil:
		return "never"
	}
	return age(now, e.GetLastScrape()) + " ago"
}

// age rounds to what a person compares: milliseconds under a second,
// tenths under a minute, seconds beyond. A router clock ahead of ours
// counts as now.
func age(now time.Time, ts *timestamppb.Timestamp) string {
	d := max(0, now.Sub(ts.AsTime()))
	switch {
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func kv(usage float64) string { return strconv.FormatFloat(usage, 'f', 2, 64) }

// recentAccuracy is the TTFT the router's recent decisions for e
// predicted against what their completions reported, and their mean
// absolute percentage error; "-" before any completion.
func recentAccuracy(e *routerv1.Endpoint) string {
	if e.GetAccuracySamples() == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s (±%.0f%%)", seconds(e.GetRecentPredictedTtftSeconds()), seconds(e.GetRecentObservedTtftSeconds()), 100*e.GetRecentTtftError())
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) + "s" }

// writeTable aligns rows in columns, each line prefixed with indent; an
// empty last column leaves no trailing blanks.
func writeTable(w io.Writer, indent string, rows [][]string) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, indent+strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for l := range strings.Lines(b.String()) {
		out.WriteString(strings.TrimRight(l, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(w, out.String())
	return err
}
