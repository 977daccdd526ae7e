package stats

import (
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		q, want float64
	}{
		{0, 1}, {1, 10}, {0.5, 5.5}, {0.9, 9.1}, {0.99, 9.91}, {-1, 1}, {2, 10},
	}
	for _, tc := range tests {
		if got := Quantile(xs, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := Quantile([]float64{7}, 0.95); got != 7 {
		t.Errorf("one value: %v", got)
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("no values should give NaN")
	}
}

func TestSummarize(t *testing.T) {
	p := Summarize([]float64{4, 1, 3, 2})
	if p.P50 != 2.5 || p.Mean != 2.5 || p.Max != 4 || p.N != 4 {
		t.Errorf("%+v", p)
	}
	if e := Summarize(nil); !math.IsNaN(e.P50) || e.N != 0 {
		t.Errorf("empty: %+v", e)
	}
	q := Quantiles([]float64{0, 10}, 2)
	if len(q) != 3 || q[0] != 0 || q[1] != 5 || q[2] != 10 {
		t.Errorf("Quantiles = %v", q)
	}
}

func TestSlope(t *testing.T) {
	// Worked out by hand: mean x 2.5, mean y 3.625, Σdx·dy 4.075, Σdx² 17.5.
	xs := []float64{0, 1, 2, 3, 4, 5}
	ys := []float64{3.1, 3.15, 3.6, 3.65, 4.1, 4.15}
	if got := Slope(xs, ys); math.Abs(got-4.075/17.5) > 1e-12 {
		t.Errorf("Slope = %v, want %v", got, 4.075/17.5)
	}
	if got := Slope([]float64{1, 2, 3}, []float64{5, 5, 5}); got != 0 {
		t.Errorf("flat: %v, want 0", got)
	}
	for _, c := range [][2][]float64{{nil, nil}, {{1}, {2}}, {{2, 2}, {1, 3}}} {
		if got := Slope(c[0], c[1]); !math.IsNaN(got) {
			t.Errorf("Slope(%v, %v) = %v, want NaN", c[0], c[1], got)
		}
	}
}
