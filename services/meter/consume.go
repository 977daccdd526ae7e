package meter

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/usage"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// consume takes batches of usage events and counts them until ctx ends.
// The consumer's messages are pulled ahead (two batches) while a batch is
// counted, so Redis and NATS work at once. A batch is at most --batch
// events, closed --batch-wait after its first arrived; it is acked only
// once counted; while Redis fails it is retried, and kept from
// redelivery meanwhile (InProgress), so the consumer stops rather than
// spreading the batch over replicas that cannot count it either.
func (m *Meter) consume(ctx context.Context, nc *nats.Conn, rdb *redis.Client) {
	js, err := jetstream.New(nc)
	if err != nil {
		m.log.Error().Err(err).Msg("jetstream")
		return
	}
	cons, err := m.ensureConsumer(ctx, js)
	if err != nil {
		return
	}
	c := newCounter(rdb, &m.cfg)
	go m.trackLag(ctx, cons)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		it, err := cons.Messages(jetstream.PullMaxMessages(2 * m.cfg.Batch))
		if err == nil {
			err = m.drain(ctx, it, c, nc, rdb)
			it.Stop()
			if ctx.Err() != nil {
				return
			}
		}
		if bus.Missing(err) || errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			// The server lost the stream or consumer (a reset server):
			// make them again.
			m.consumer.Store(&err)
			if cons, err = m.ensureConsumer(ctx, js); err != nil {
				return
			}
			continue
		}
		m.log.Debug().Err(err).Msg("consuming stopped; starting again")
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// drain counts batches from it until ctx ends (nil) or it fails.
func (m *Meter) drain(ctx context.Context, it jetstream.MessagesContext, c *counter, nc *nats.Conn, rdb *redis.Client) error {
	var msgs []jetstream.Msg
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		msgs = append(msgs[:0], msg)
		deadline := time.Now().Add(m.cfg.BatchWait)
		for len(msgs) < m.cfg.Batch {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			msg, err := it.Next(jetstream.NextMaxWait(left))
			if err != nil {
				if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
					break
				}
				m.process(ctx, c, nc, rdb, msgs)
				return err
			}
			msgs = append(msgs, msg)
		}
		m.process(ctx, c, nc, rdb, msgs)
	}
}

// process counts one batch, then acks it.
func (m *Meter) process(ctx context.Context, c *counter, nc *nats.Conn, rdb *redis.Client, msgs []jetstream.Msg) {
	start := time.Now()
	byTenant := map[string][]*event{}
	var order []string
	var events []*event
	var keep []jetstream.Msg
	for _, msg := range msgs {
		var ev eventsv1.UsageEvent
		if err := proto.Unmarshal(msg.Data(), &ev); err != nil || ev.GetRequestId() == "" {
			// Never countable: drop it for good rather than have it come
			// back forever.
			m.metrics.events.WithLabelValues("undecodable").Inc()
			m.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("usage event dropped: undecodable or without request id")
			_ = msg.Term()
			continue
		}
		e := newEvent(&ev, m.labels, start)
		if byTenant[e.tenant] == nil {
			order = append(order, e.tenant)
		}
		byTenant[e.tenant] = append(byTenant[e.tenant], e)
		events = append(events, e)
		keep = append(keep, msg)
	}
	for _, t := range order {
		if !m.countRetrying(ctx, c, t, byTenant[t], keep) {
			return // ctx ended: left unacked, to be delivered again
		}
	}
	active := map[int64]map[string]bool{}
	feed := m.newFeedWriter(nc)
	for _, e := range events {
		if !e.counted {
			m.metrics.duplicates.Inc()
			continue
		}
		m.metrics.counted.Inc()
		m.metrics.observe(e)
		if feedTenant(e.tenant) {
			feed.publish(e)
			minute := usage.Minute.Start(e.finished)
			if active[minute] == nil {
				active[minute] = map[string]bool{}
			}
			active[minute][e.tenant] = true
		}
	}
	m.markActive(ctx, rdb, active)
	if m.beforeAck != nil && !m.beforeAck(keep) {
		return
	}
	for _, msg := range keep {
		if err := msg.Ack(); err != nil {
			// Delivered again after --ack-wait, and found counted.
			m.metrics.retry.WithLabelValues("ack").Inc()
		}
	}
	m.metrics.batch.Observe(time.Since(start).Seconds())
}

// countRetrying counts one tenant's events, retrying while Redis fails,
// and reports false when ctx ended first. Meanwhile the batch's events are
// kept from redelivery.
func (m *Meter) countRetrying(ctx context.Context, c *counter, tenant string, evs []*event, batch []jetstream.Msg) bool {
	backoff := 50 * time.Millisecond
	lastProgress := time.Now()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.count(cctx, tenant, evs)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		m.metrics.retry.WithLabelValues("redis").Inc()
		m.log.Warn().Err(err).Msg("counting failed; the batch is retried, unacked")
		if time.Since(lastProgress) > m.cfg.AckWait/3 {
			for _, msg := range batch {
				_ = msg.InProgress()
			}
			lastProgress = time.Now()
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// markActive records the tenants counted per minute, whose summaries
// that minute's publisher sends. Best effort: a miss loses a summary,
// never a count.
func (m *Meter) markActive(ctx context.Context, rdb *redis.Client, active map[int64]map[string]bool) {
	if len(active) == 0 || m.cfg.SummaryDelay == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pipe := rdb.Pipeline()
	for minute, tenants := range active {
		key := rediskeys.UsageActive(m.cfg.KeyPrefix, minute)
		members := make([]any, 0, len(tenants))
		for t := range tenants {
			members = append(members, t)
		}
		pipe.SAdd(cctx, key, members...)
		pipe.Expire(cctx, key, rediskeys.UsageActiveTTL)
	}
	if _, err := pipe.Exec(cctx); err != nil {
		m.log.Debug().Err(err).Msg("active tenants not recorded: their summaries may be missed")
	}
}

// trackLag exports the consumer's pending count every few seconds.
func (m *Meter) trackLag(ctx context.Context, cons jetstream.Consumer) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if info, err := cons.Info(cctx); err == nil {
			m.metrics.lag.Set(float64(info.NumPending))
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
