package drills

import (
	"context"
	"fmt"
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
	return out
}
