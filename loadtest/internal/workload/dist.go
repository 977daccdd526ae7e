package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// MaxDistValue bounds every length distribution: no model serves prompts of
// more than a few million tokens, and a bound keeps a typo from allocating
// gigabytes of text.
const MaxDistValue = 1 << 22

// Dist is a distribution of positive integers (token counts, turns), written
// on the command line as
//
//	256               always 256
//	128-384           uniform on [128, 384]
//	uniform:128-384   the same
//	normal:512,64     normal with mean 512 and standard deviation 64,
//	                  rounded and clipped to [1, 2×mean]
type Dist struct {
	kind distKind
	a, b float64 // const: a; uniform: [a, b]; normal: mean a, stdev b
}

type distKind uint8

const (
	distConst distKind = iota
	distUniform
	distNormal
)

// Const is the distribution that always gives n.
func Const(n int) Dist { return Dist{kind: distConst, a: float64(n)} }

// Uniform is the uniform distribution on [lo, hi].
func Uniform(lo, hi int) Dist { return Dist{kind: distUniform, a: float64(lo), b: float64(hi)} }

// ParseDist parses the command-line form documented on Dist.
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	kind, rest, hasKind := strings.Cut(s, ":")
	if !hasKind {
		kind, rest = "", s
	}
	num := func(t string) (float64, error) {
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("distribution %q: %q is not a number", s, t)
		}
		if v < 0 || v > MaxDistValue {
			return 0, fmt.Errorf("distribution %q: %v out of range [0, %d]", s, v, MaxDistValue)
		}
		return v, nil
	}
	var d Dist
	var err error
	switch kind {
	case "", "uniform":
		lo, hi, isRange := strings.Cut(rest, "-")
		if !isRange {
			if hasKind {
				return Dist{}, fmt.Errorf("distribution %q: want uniform:LO-HI", s)
			}
			d.kind = distConst
			if d.a, err = num(rest); err != nil {
				return Dist{}, err
			}
			break
		}
		d.kind = distUniform
		if d.a, err = num(lo); err != nil {
			return Dist{}, err
		}
		if d.b, err = num(hi); err != nil {
			return Dist{}, err
		}
		// Bounds are whole tokens; rounding here keeps Sample and Max in
		// agreement for fractional input.
		d.a, d.b = math.Round(d.a), math.Round(d.b)
		if d.b < d.a {
			return Dist{}, fmt.Errorf("distribution %q: upper bound below lower bound", s)
		}
	case "normal":
		mean, sd, ok := strings.Cut(rest, ",")
		if !ok {
			return Dist{}, fmt.Errorf("distribution %q: want normal:MEAN,STDEV", s)
		}
		d.kind = distNormal
		if d.a, err = num(mean); err != nil {
			return Dist{}, err
		}
		if d.b, err = num(sd); err != nil {
			return Dist{}, err
		}
	default:
		return Dist{}, fmt.Errorf("distribution %q: unknown kind %q (want a number, LO-HI, uniform:LO-HI or normal:MEAN,STDEV)", s, kind)
	}
	if d.Max() < 1 {
		return Dist{}, fmt.Errorf("distribution %q: never gives a positive value", s)
	}
	return d, nil
}

// String is the form ParseDist reads.
func (d Dist) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	switch d.kind {
	case distUniform:
		return "uniform:" + f(d.a) + "-" + f(d.b)
	case distNormal:
		return "normal:" + f(d.a) + "," + f(d.b)
	default:
		return f(d.a)
	}
}

// Set implements flag.Value.
func (d *Dist) Set(s string) error {
	v, err := ParseDist(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalText makes a Dist appear in JSON parameters in its flag form.
func (d Dist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the flag form back.
func (d *Dist) UnmarshalText(b []byte) error { return d.Set(string(b)) }

// Mean is the distribution's mean before rounding and clipping.
func (d Dist) Mean() float64 {
	if d.kind == distUniform {
		return (d.a + d.b) / 2
	}
	return d.a
}

// Max is the largest value Sample can return.
func (d Dist) Max() int {
	switch d.kind {
	case distUniform:
		return int(d.b)
	case distNormal:
		if d.b == 0 {
			return max(1, int(math.Round(d.a)))
		}
		return max(1, int(math.Round(2*d.a)))
	default:
		return int(math.Round(d.a))
	}
}

// Sample draws one value, at least 1.
func (d Dist) Sample(r *rand.Rand) int {
	var v float64
	switch d.kind {
	case distUniform:
		v = d.a
		if d.b > d.a {
			v = d.a + float64(r.IntN(int(d.b-d.a)+1))
		}
	case distNormal:
		v = math.Round(d.a + d.b*r.NormFloat64())
		v = min(v, math.Round(2*d.a))
	default:
		v = math.Round(d.a)
	}
	return max(1, int(v))
}

var errZero = errors.New("zero distribution")

// validate reports a distribution that was never set.
func (d Dist) validate(name string) error {
	if d.Max() < 1 {
		return fmt.Errorf("%s: %w: set a positive value", name, errZero)
	}
	return nil
}
