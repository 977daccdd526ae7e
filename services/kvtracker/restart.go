package kvtracker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/vllm"
	"github.com/switchyard-dev/switchyard/services/kvtracker/internal/ingest"
)

// A restarted worker's cache is empty, but its KV event stream says so only
// with its first event, which may come long after (an idle worker) or be
// the very request routed to it for the cache it no longer has. So the
// tracker asks the worker itself: vLLM exports its process start time
// (process_start_time_seconds, the Prometheus client's process collector)
// on /metrics. The restart watch reads it every --restart-check-interval,
// and again as soon as the KV event connection drops (a dying process
// breaks it; the restarted one is polled until its metrics answer). A new
// start time makes the pipeline drop the worker's blocks in a new epoch,
// which the routers apply at once (ingest.Worker.ProcessRestarted).

const (
	// metricsTimeout bounds one read of a worker's metrics.
	metricsTimeout = 2 * time.Second
	// maxMetricsBytes bounds what is read of them: vLLM's page is tens of
	// kilobytes; the series sought comes early (the process collector).
	maxMetricsBytes = 8 << 20
	// reconnectPoll is how often the connection's drop count is looked
	// at, and the metrics read while the worker is coming back.
	reconnectPoll = 100 * time.Millisecond
)

// restartWatch follows one worker's process start time.
type restartWatch struct {
	url      string // the worker's metrics URL
	client   *http.Client
	interval time.Duration
	conns    ingest.Reconnecting // nil for workers on the bound socket
	w        *ingest.Worker
	log      zerolog.Logger
	started  prometheus.Gauge // the start time last read
}

// run polls until ctx ends.
func (r *restartWatch) run(ctx context.Context) {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	fast := time.NewTicker(reconnectPoll)
	defer fast.Stop()
	var (
		known   float64 // the start time last read; 0 before the first
		seen    uint64  // the pipeline's restart count when known was read
		drops   uint64
		urgent  bool // the connection dropped: read until the worker answers
		failing bool // the last read failed (logged once)
	)
	if r.conns != nil {
		drops = r.conns.ConnectionErrors()
	}
	// The first read is at once: a restart is a change from it.
	now := make(chan time.Time, 1)
	now <- time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-now:
		case <-tick.C:
		case <-fast.C:
			if r.conns != nil {
				if n := r.conns.ConnectionErrors(); n != drops {
					drops, urgent = n, true
				}
			}
			if !urgent {
				continue
			}
		}
		start, err := r.read(ctx)
		if err != nil {
			if !failing && !urgent && ctx.Err() == nil {
				r.log.Debug().Err(err).Str("url", r.url).Msg("worker start time not read")
			}
			failing = true
			continue
		}
		failing, urgent = false, false
		if known != 0 && start != known {
			r.log.Info().Time("started", time.Unix(0, int64(start*1e9))).Msg("worker process restarted")
			r.w.ProcessRestarted(seen)
			// Acted on now, or already: either way the count is past it
			// (the pipeline may not have taken the signal yet).
			seen++
		}
		known, seen = start, max(seen, r.w.Restarts())
		r.started.Set(start)
	}
}

// read fetches the worker's metrics and returns its process start time.
func (r *restartWatch) read(ctx context.Context) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	return parseStartTime(io.LimitReader(resp.Body, maxMetricsBytes))
}

var errNoStartTime = errors.New("no " + vllm.MetricProcessStartTime + " in the worker's metrics")

// parseStartTime finds process_start_time_seconds in a Prometheus text
// exposition: the first sample of the series, labels (if any) skipped. It
// reads line by line in bounded memory; a line too long to be a sample of
// it is skipped.
func parseStartTime(r io.Reader) (float64, error) {
	br := bufio.NewReaderSize(r, 4096)
	name := []byte(vllm.MetricProcessStartTime)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any sample of the series: skip the rest of it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return 0, endErr(err)
			}
			continue
		}
		if v, ok := startSample(line, name); ok {
			return v, nil
		}
		if err != nil {
			return 0, endErr(err)
		}
	}
}

func endErr(err error) error {
	if errors.Is(err, io.EOF) {
		return errNoStartTime
	}
	return err
}

// startSample reads `name value [timestamp]` or `name{labels} value
// [timestamp]`; ok is false for any other line and for a value that is not
// a positive finite number.
func startSample(line, name []byte) (float64, bool) {
	rest, found := bytes.CutPrefix(line, name)
	if !found || len(rest) == 0 {
		return 0, false
	}
	switch rest[0] {
	case '{':
		end := bytes.LastIndexByte(rest, '}')
		if end < 0 {
			return 0, false
		}
		rest = rest[end+1:]
	case ' ', '\t':
	default:
		return 0, false // another series with this prefix
	}
	fields := bytes.Fields(rest)
	if len(fields) == 0 || len(fields) > 2 {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(fields[0]), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}
