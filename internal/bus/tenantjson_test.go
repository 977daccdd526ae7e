package bus

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// FuzzTenantUsageJSON: AppendJSON writes what encoding/json does (the
// same document once decoded), for any strings (control characters,
// invalid UTF-8, HTML) and numbers.
func FuzzTenantUsageJSON(f *testing.F) {
	f.Add("req-1", "team.a", "meta/llama<3>", "ok\n\x00\xff\u2028", int64(1000), float64(0.25), float64(1e-7), int64(1733000000), "tag&1")
	f.Add("", "", "", "", int64(0), float64(0), float64(123456789012345678901234.0), int64(0), "")
	f.Fuzz(func(t *testing.T, id, tenant, model, outcome string, tokens int64, ttft, e2e float64, unix int64, tag string) {
		if math.IsNaN(ttft) || math.IsInf(ttft, 0) || math.IsNaN(e2e) || math.IsInf(e2e, 0) {
			return // encoding/json refuses them; the meter never has them
		}
		at := time.Unix(unix%(1<<40), unix%1e9).UTC()
		u := TenantUsage{RequestID: id, Tenant: tenant, Model: model, ServedModel: model, API: "chat.completions", TargetKind: tag,
			Outcome: outcome, StatusCode: int32(tokens), InputTokens: tokens, CachedInputTokens: -tokens, OutputTokens: tokens / 3,
			ReasoningTokens: tokens % 7, TTFT: ttft, ITLMean: ttft / 3, E2E: e2e, Queue: -e2e, Attempts: int32(tokens % 3),
			Tags: []string{tag, outcome}, StartedAt: at, FinishedAt: at.Add(time.Duration(tokens))}
		if tokens%2 == 0 {
			u.Tags = nil
		}
		want, err := json.Marshal(u)
		if err != nil {
			t.Skip(err)
		}
		got := u.AppendJSON(nil)
		// The same document: both decode to the same value.
		var a, b any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("AppendJSON wrote invalid JSON: %v\n%s", err, got)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got, want)
		}
	})
}

func BenchmarkTenantUsageJSON(b *testing.B) {
	u := TenantUsage{RequestID: "01JDXYZABCDEFGHJKMNPQRSTVW", Tenant: "team-a", Model: "qwen-3.6-27b", API: "chat.completions", TargetKind: "local",
		TargetType: "vLLM", Outcome: "ok", StatusCode: 200, InputTokens: 2100, CachedInputTokens: 1800, OutputTokens: 512, TTFT: 0.234, ITLMean: 0.021,
		E2E: 11.2, StartedAt: time.Now(), FinishedAt: time.Now()}
	b.Run("AppendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = u.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(u)
		}
	})
}
