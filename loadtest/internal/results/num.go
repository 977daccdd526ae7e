package results

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Num is a float that encodes as JSON null when it is not a number (a
// percentile of no requests, a ratio against zero), since JSON has no NaN.
type Num float64

// NaN is the missing value.
var NaN = Num(math.NaN())

// Valid reports a finite value.
func (n Num) Valid() bool { return !math.IsNaN(float64(n)) && !math.IsInf(float64(n), 0) }

// MarshalJSON implements json.Marshaler, with up to 6 significant digits:
// more would claim a precision no load test has.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Valid() {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', 6, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler; null reads as NaN.
func (n *Num) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*n = NaN
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}
