// Package report renders results: a Markdown table for the console and
// READMEs, and a self-contained HTML page with inline SVG charts (TTFT
// distributions, goodput and TTFT against concurrency per strategy; for
// open-loop runs, TTFT p90, output tokens per second and goodput against
// the offered rate).
package report

import (
	"fmt"
	"math"

	"github.com/switchyard-dev/switchyard/loadtest/internal/results"
)

// Sec formats model seconds.
func Sec(v results.Num) string {
	if !v.Valid() {
		return "–"
	}
	switch a := math.Abs(float64(v)); {
	case a >= 100:
		return fmt.Sprintf("%.0f s", v)
	case a >= 10:
		return fmt.Sprintf("%.1f s", v)
	case a >= 1:
		return fmt.Sprintf("%.2f s", v)
	case a >= 0.1:
		return fmt.Sprintf("%.0f ms", v*1000)
	default:
		return fmt.Sprintf("%.1f ms", v*1000)
	}
}

// Number formats v with prec decimals.
func Number(v results.Num, prec int) string {
	if math.IsInf(float64(v), 1) {
		return "∞"
	}
	if !v.Valid() {
		return "–"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

// Pct formats a fraction as a percentage.
func Pct(v results.Num) string {
	if !v.Valid() {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", v*100)
}

// Ratio formats a "× better" ratio.
func Ratio(v results.Num) string {
	if math.IsInf(float64(v), 1) {
		return "∞"
	}
	if !v.Valid() {
		return "–"
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

// Gap formats a relative gap (0.12 → +12 %).
func Gap(v results.Num) string {
	if !v.Valid() {
		return "–"
	}
	pct := math.Round(float64(v) * 100)
	if pct == 0 {
		pct = 0 // no "-0 %"
	}
	return fmt.Sprintf("%+.0f %%", pct)
}
