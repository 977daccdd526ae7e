package drills

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"

	"github.com/switchyard-dev/switchyard/internal/bus"
)

// usageEvents reads the whole usage stream and groups its events by
// request id.
func usageEvents(ctx context.Context, natsURL string) (map[string][]*eventsv1.UsageEvent, error) {
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, bus.StreamUsage)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	counts := map[string][]*eventsv1.UsageEvent{}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return counts, nil
	}
	c, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	for {
		batch, err := c.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev := &eventsv1.UsageEvent{}
			if err := proto.Unmarshal(m.Data(), ev); err != nil {
				return nil, fmt.Errorf("usage event: %w", err)
			}
			counts[ev.GetRequestId()] = append(counts[ev.GetRequestId()], ev)
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			if md.Sequence.Stream >= last {
				return counts, batch.Error()
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("usage stream: read stopped before sequence %d", last)
		}
	}
}

// checkUsage waits (up to within) until every request the clients saw an
// id for has its usage event, then fails the test for any request whose
// event is missing or counted more than once. It returns the stream's
// events, one per request id.
func checkUsage(t *testing.T, f *fleet, rs []record, within time.Duration) map[string]*eventsv1.UsageEvent {
	t.Helper()
	var ids []string
	for _, r := range rs {
		if r.id != "" {
			ids = append(ids, r.id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("usage: no request carried an id")
	}
	deadline := time.Now().Add(within)
	var counts map[string][]*eventsv1.UsageEvent
	var missing []string
	var lastErr error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := usageEvents(ctx, f.natsURL)
		cancel()
		if err == nil {
			counts, missing = c, missing[:0]
			for _, id := range ids {
				if len(counts[id]) == 0 {
					missing = append(missing, id)
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("usage: %d of %d requests have no usage event after %v (last error: %v); first: %s",
				len(missing), len(ids), within, lastErr, strings.Join(missing[:min(5, len(missing))], ", "))
		}
		time.Sleep(250 * time.Millisecond)
	}
	var dup []string
	out := make(map[string]*eventsv1.UsageEvent, len(counts))
	for id, evs := range counts {
		out[id] = evs[0]
		if len(evs) > 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", id, len(evs)))
		}
	}
	slices.Sort(dup)
	if len(dup) > 0 {
		t.Errorf("usage: %d requests counted more than once: %s", len(dup), strings.Join(dup[:min(5, len(dup))], ", "))
	}
	t.Logf("usage: %d requests, %d events, none lost or duplicated", len(ids), len(counts))
	if !f.rollupsLost {
		checkMetered(t, f, len(counts), within)
	}
	return out
}

// checkMetered waits until the meter has counted every request of the
// stream, once: its usage API's total (every request is the default
// tenant's) equals the stream's distinct request ids, and stays there.
func checkMetered(t *testing.T, f *fleet, want int, within time.Duration) {
	t.Helper()
	q := fmt.Sprintf("%s/v1/usage?tenant=default&from=%s&to=%s", f.meter.httpURL,
		f.started.Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	got := -1
	deadline := time.Now().Add(within)
	for {
		if n, err := meteredTotal(q); err == nil {
			got = n
			if n == want {
				break
			}
			if n > want {
				// The stream may have grown since it was read: an event
				// published late (a request the fleet itself made, a
				// spool drained after the read) is the meter's to count
				// too. Only more than the stream holds now is counted
				// twice.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c, err := usageEvents(ctx, f.natsURL)
				cancel()
				if err == nil && len(c) > want {
					t.Logf("usage: the stream grew from %d to %d requests since it was read", want, len(c))
					want = len(c)
					continue
				}
				t.Fatalf("meter: %d requests counted for %d in the stream: some counted twice", n, want)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("meter: %d requests counted after %v, want the stream's %d", got, within, want)
		}
		time.Sleep(250 * time.Millisecond)
	}
	time.Sleep(time.Second) // a duplicate counted late would show now
	if n, err := meteredTotal(q); err != nil || n != want {
		t.Fatalf("meter: %d requests counted (%v), want %d", n, err, want)
	}
	t.Logf("meter: %d requests counted, each once", want)
}

func meteredTotal(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("usage API: %s", resp.Status)
	}
	var a struct {
		Total struct {
			Requests int `json:"requests"`
		} `json:"total"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return 0, err
	}
	return a.Total.Requests, nil
}
