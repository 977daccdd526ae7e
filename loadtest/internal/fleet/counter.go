package fleet

import (
	"bufio"
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
	body, err := getMetrics(ctx, client, url)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	defer body.Close()
	return ParseCounter(body, name)
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
