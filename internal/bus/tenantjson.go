package bus

import (
	"strconv"
	"time"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
)

// AppendJSON appends u as encoding/json would marshal it (the same
// members, values and omissions, if not the same escapes: it leaves <, >
// and & as they are; FuzzTenantUsageJSON holds it to that), in a fifth of
// the time: the meter writes one per request.
func (u *TenantUsage) AppendJSON(b []byte) []byte {
	b = append(b, `{"request_id":`...)
	b = jsonscan.AppendString(b, u.RequestID)
	b = append(b, `,"tenant":`...)
	b = jsonscan.AppendString(b, u.Tenant)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, u.Model)
	if u.ServedModel != "" {
		b = append(b, `,"served_model":`...)
		b = jsonscan.AppendString(b, u.ServedModel)
	}
	b = append(b, `,"api":`...)
	b = jsonscan.AppendString(b, u.API)
	for _, f := range [...]struct{ key, v string }{{`,"target_kind":`, u.TargetKind}, {`,"target_type":`, u.TargetType}, {`,"provider":`, u.Provider}} {
		if f.v != "" {
			b = append(b, f.key...)
			b = jsonscan.AppendString(b, f.v)
		}
	}
	b = append(b, `,"outcome":`...)
	b = jsonscan.AppendString(b, u.Outcome)
	b = append(b, `,"status_code":`...)
	b = strconv.AppendInt(b, int64(u.StatusCode), 10)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, u.InputTokens, 10)
	b = append(b, `,"cached_input_tokens":`...)
	b = strconv.AppendInt(b, u.CachedInputTokens, 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, u.OutputTokens, 10)
	if u.ReasoningTokens != 0 {
		b = append(b, `,"reasoning_tokens":`...)
		b = strconv.AppendInt(b, u.ReasoningTokens, 10)
	}
	if u.TTFT != 0 {
		b = append(b, `,"ttft_seconds":`...)
		b = appendFloat(b, u.TTFT)
	}
	if u.ITLMean != 0 {
		b = append(b, `,"itl_mean_seconds":`...)
		b = appendFloat(b, u.ITLMean)
	}
	b = append(b, `,"e2e_seconds":`...)
	b = appendFloat(b, u.E2E)
	if u.Queue != 0 {
		b = append(b, `,"queue_seconds":`...)
		b = appendFloat(b, u.Queue)
	}
	if u.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(u.Attempts), 10)
	}
	if len(u.Tags) > 0 {
		b = append(b, `,"tags":[`...)
		for i, t := range u.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, t)
		}
		b = append(b, ']')
	}
	b = append(b, `,"started_at":`...)
	b = appendTime(b, u.StartedAt)
	b = append(b, `,"finished_at":`...)
	b = appendTime(b, u.FinishedAt)
	return append(b, '}')
}

// appendFloat is encoding/json's float64 format.
func appendFloat(b []byte, f float64) []byte {
	abs := f
	if abs < 0 {
		abs = -abs
	}
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendTime is time.Time's MarshalJSON (RFC 3339 with nanoseconds).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
