package meter

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	"github.com/switchyard-dev/switchyard/internal/usage"
)

// feedWriter republishes one batch's counted events; its buffer and
// subjects are reused across the batch.
type feedWriter struct {
	m        *Meter
	nc       *nats.Conn
	buf      []byte
	subjects map[[2]string]string
}

func (m *Meter) newFeedWriter(nc *nats.Conn) *feedWriter {
	return &feedWriter{m: m, nc: nc, subjects: map[[2]string]string{}}
}

// publish republishes a counted event on its tenant's feed. Core NATS: a
// feed is for watching, the rollups are the record.
func (f *feedWriter) publish(e *event) {
	ev := e.ev
	u := bus.TenantUsage{
		RequestID: ev.GetRequestId(), Tenant: ev.GetTenant(), Model: ev.GetModel(), ServedModel: ev.GetServedModel(),
		API: ev.GetApi(), TargetKind: ev.GetTargetKind(), TargetType: ev.GetTargetType(), Provider: ev.GetProvider(),
		Outcome: ev.GetOutcome(), StatusCode: ev.GetStatusCode(),
		InputTokens: max(0, ev.GetPromptTokens()), CachedInputTokens: max(0, ev.GetCachedPromptTokens()),
		OutputTokens: max(0, ev.GetCompletionTokens()), ReasoningTokens: max(0, ev.GetReasoningTokens()),
		TTFT: ev.GetTtftSeconds(), ITLMean: ev.GetItlMeanSeconds(), E2E: ev.GetE2ESeconds(), Queue: ev.GetQueueSeconds(),
		Attempts: ev.GetAttempts(), Tags: ev.GetTags(), FinishedAt: e.finished,
	}
	if ev.GetStartedAt().IsValid() {
		u.StartedAt = ev.GetStartedAt().AsTime()
	}
	k := [2]string{ev.GetTenant(), e.model}
	subj, ok := f.subjects[k]
	if !ok {
		subj = bus.TenantUsageSubject(k[0], k[1])
		f.subjects[k] = subj
	}
	f.buf = u.AppendJSON(f.buf[:0])
	err := f.nc.Publish(subj, f.buf) // copied into the connection's buffer
	f.m.countFeed("usage", err)
}

func (m *Meter) countFeed(kind string, err error) {
	m.metrics.feedResult(kind, err).Inc()
}

// summaries publishes, --summary-delay after each minute ends, every
// active tenant's summary of that minute, read from the rollups. One
// replica does it per minute: the one that takes the minute's lock.
func (m *Meter) summaries(ctx context.Context, nc *nats.Conn, rdb *redis.Client) {
	for {
		next := time.Unix(usage.Minute.Start(time.Now())+60, 0).Add(m.cfg.SummaryDelay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		minute := usage.Minute.Start(next.Add(-m.cfg.SummaryDelay)) - 60
		m.summarize(ctx, nc, rdb, minute)
	}
}

// summarize publishes the summaries of the minute starting at start
// (Unix seconds) unless another replica took it.
func (m *Meter) summarize(ctx context.Context, nc *nats.Conn, rdb *redis.Client, start int64) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	won, err := rdb.SetNX(cctx, rediskeys.UsageSummaryLock(m.cfg.KeyPrefix, start), m.cfg.ReplicaID, rediskeys.UsageActiveTTL).Result()
	if err != nil || !won {
		return
	}
	tenants, err := rdb.SMembers(cctx, rediskeys.UsageActive(m.cfg.KeyPrefix, start)).Result()
	if err != nil {
		m.log.Warn().Err(err).Msg("summaries not published: active tenants unreadable")
		return
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		h, err := rdb.HGetAll(cctx, rediskeys.UsageRollup(m.cfg.KeyPrefix, t, usage.Minute.Name, start)).Result()
		if err != nil {
			m.countFeed("summary", err)
			continue
		}
		s := summary(t, start, h)
		data, err := json.Marshal(s)
		if err == nil {
			err = nc.Publish(bus.TenantSummarySubject(t), data)
		}
		m.countFeed("summary", err)
	}
}

// summary is a tenant's minute rollup as its feed carries it.
func summary(tenant string, start int64, h map[string]string) bus.TenantSummary {
	per := map[string]*usage.Counters{}
	usage.ParseHash(per, h)
	s := bus.TenantSummary{Tenant: tenant, Start: time.Unix(start, 0).UTC(), End: time.Unix(start+60, 0).UTC(), Models: []bus.TenantModelSummary{}}
	for model, c := range per {
		r := usage.Row{Counters: *c}
		r.Finish()
		s.Models = append(s.Models, bus.TenantModelSummary{
			Model: model, Requests: c.Requests, Outcomes: c.Outcomes,
			CachedInputTokens: c.CachedInput, UncachedInputTokens: c.UncachedInput,
			OutputTokens: c.Output, ReasoningTokens: c.Reasoning, TTFTMean: r.TTFTMean, E2EMean: r.E2EMean,
		})
	}
	sort.Slice(s.Models, func(i, j int) bool { return s.Models[i].Model < s.Models[j].Model })
	return s
}
