package results

import (
	"reflect"
	"slices"
)

var numType = reflect.TypeFor[Num]()

// Median combines repeated runs of one configuration: counts, the TTFT
// distribution and error samples come from pooled (the summary of every
// run's records together); every other figure is the median of the runs'
// figures, since a median over repeats is what a noisy shared machine
// allows quoting.
func Median(runs []*Summary, pooled *Summary) *Summary {
	out := *pooled
	if len(runs) < 2 {
		return &out
	}
	medianNums(reflect.ValueOf(&out).Elem(), func(path []int) []float64 {
		vals := make([]float64, 0, len(runs))
		for _, r := range runs {
			v := reflect.ValueOf(r).Elem().FieldByIndex(path).Interface().(Num)
			if v.Valid() {
				vals = append(vals, float64(v))
			}
		}
		return vals
	}, nil)
	return &out
}

// medianNums sets every Num field reachable through embedded or nested
// structs of v to the median of the values get returns for its path.
func medianNums(v reflect.Value, get func(path []int) []float64, prefix []int) {
	for i := range v.NumField() {
		f := v.Field(i)
		path := append(slices.Clone(prefix), i)
		switch {
		case f.Type() == numType:
			vals := get(path)
			if len(vals) == 0 {
				f.Set(reflect.ValueOf(NaN))
				continue
			}
			slices.Sort(vals)
			m := vals[len(vals)/2]
			if len(vals)%2 == 0 {
				m = (vals[len(vals)/2-1] + m) / 2
			}
			f.Set(reflect.ValueOf(Num(m)))
		case f.Kind() == reflect.Struct && f.CanSet():
			medianNums(f, get, path)
		}
	}
}
