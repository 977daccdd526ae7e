// Command report renders bench/fairness.sh's loadtest results as the
// Markdown table the README quotes: per run and tenant, answers, 429s,
// TTFT percentiles and output throughput, and the steady tenant's median
// TTFT beside the flood relative to its median alone.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type tenant struct {
	Tenant      string   `json:"tenant"`
	Concurrency int      `json:"concurrency"`
	Succeeded   int      `json:"succeeded"`
	Refused429  int      `json:"refused_429"`
	TTFTP50     *float64 `json:"ttft_p50_s"`
	TTFTP90     *float64 `json:"ttft_p90_s"`
	TTFTP99     *float64 `json:"ttft_p99_s"`
	TokensPerS  *float64 `json:"output_tokens_per_s"`
}

type result struct {
	Tenants []tenant `json:"tenants"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: report ALONE.json RUN.json...")
		os.Exit(2)
	}
	var runs []result
	for _, p := range os.Args[1:] {
		b, err := os.ReadFile(p)
		if err != nil {
			fail(err)
		}
		var r result
		if err := json.Unmarshal(b, &r); err != nil {
			fail(fmt.Errorf("%s: %w", p, err))
		}
		runs = append(runs, r)
	}
	alone := steadyP50(runs[0])
	var b strings.Builder
	b.WriteString("| run | tenant | clients | ok | 429 | TTFT p50 | TTFT p90 | TTFT p99 | output tok/s | steady p50 / alone |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, r := range runs {
		name := strings.TrimSuffix(filepath.Base(os.Args[i+1]), ".json")
		for _, t := range r.Tenants {
			ratio := ""
			if t.Tenant == "steady" && alone > 0 && t.TTFTP50 != nil {
				ratio = fmt.Sprintf("%.2f×", *t.TTFTP50/alone)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", name, t.Tenant, t.Concurrency,
				t.Succeeded, t.Refused429, secs(t.TTFTP50), secs(t.TTFTP90), secs(t.TTFTP99), num(t.TokensPerS), ratio)
		}
	}
	fmt.Print(b.String())
}

func steadyP50(r result) float64 {
	for _, t := range r.Tenants {
		if t.Tenant == "steady" && t.TTFTP50 != nil {
			return *t.TTFTP50
		}
	}
	return 0
}

func secs(v *float64) string {
	switch {
	case v == nil:
		return "–"
	case *v < 1:
		return fmt.Sprintf("%.0f ms", *v*1000)
	}
	return fmt.Sprintf("%.2f s", *v)
}

func num(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f", *v)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "report:", err)
	os.Exit(1)
}
