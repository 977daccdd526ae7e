package fleet

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ReadCounter scrapes url's /metrics (url without /v1) and returns the sum
// of metric name over its series.
func ReadCounter(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	v, err := ReadCounters(ctx, client, url, name)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// maxMetricsPage bounds the /metrics page ReadCounters holds in memory.
const maxMetricsPage = 16 << 20

// ReadCounters is ReadCounter for several metrics read off one scrape, so
// that they describe the same moment (a histogram's _sum and _count).
func ReadCounters(ctx context.Context, client *http.Client, url string, names ...string) ([]float64, error) {
	body, err := getMetrics(ctx, client, url)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", strings.Join(names, ", "), err)
	}
	defer body.Close()
	page, err := io.ReadAll(io.LimitReader(body, maxMetricsPage+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", strings.Join(names, ", "), err)
	case len(page) > maxMetricsPage:
		return nil, fmt.Errorf("read %s: %s/metrics is larger than %d bytes", strings.Join(names, ", "), url, maxMetricsPage)
	}
	out := make([]float64, len(names))
	for i, name := range names {
		if out[i], err = ParseCounter(bytes.NewReader(page), name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseCounter reads the Prometheus text exposition from r and sums the
// samples of metric name (with or without labels); an exposition without
// it is an error, as a counter a process registers is always exposed.
func ParseCounter(r io.Reader, name string) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sum, found := 0.0, false
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				return 0, fmt.Errorf("read %s: unterminated labels in %q", name, sc.Text())
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("read %s: no value in %q", name, sc.Text())
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", name, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	if !found {
		return 0, fmt.Errorf("read %s: not in /metrics", name)
	}
	return sum, nil
}
