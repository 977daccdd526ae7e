package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	"github.com/switchyard-dev/switchyard/internal/vllm"
)

// fastConfig is a fleet on free ports whose model time runs 1000× faster
// than the wall: an 8k-token prefill takes 3 ms.
func fastConfig() Config {
	c := DefaultConfig()
	c.Port = 0
	c.TimeScale = 1000
	c.DefaultMaxTokens = 16
	c.ShutdownTimeout = 5 * time.Second
	return c
}

func startFleet(t *testing.T, cfg Config) *Fleet {
	t.Helper()
	f, err := StartFleet(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})
	return f
}

func post(t *testing.T, url string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = strings.NewReader(string(js))
	}
	resp, err := http.Post(url, "application/json", rd)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// sse splits a streamed body into its data payloads.
func sse(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		out = append(out, data)
	}
	return out
}

func chatBody(content string, maxTokens int, extra map[string]any) map[string]any {
	b := map[string]any{
		"model":      DefaultServedModelName,
		"messages":   []map[string]any{{"role": "system", "content": "You are terse."}, {"role": "user", "content": content}},
		"max_tokens": maxTokens,
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// longText is about n tokens of prose.
func longText(seed, n int) string {
	words := strings.Fields(tokenizer.SampleText)
	var b strings.Builder
	for i := range n * 3 / 4 {
		b.WriteString(words[(seed*7+i)%len(words)])
		b.WriteByte(' ')
	}
	return b.String()
}

type simChat struct {
	openaiapi.ChatCompletion
	SimTiming *SimTiming `json:"sim_timing"`
}

// TestReadsWhatVLLMReads: the simulated worker reads a body by vLLM's key
// rule (internal/jsonscan): "Messages" is an extra field vLLM ignores, and
// of a repeated key the last counts. A body with a 10-word "messages" and a
// 4,000-word "Messages" is the 10-word prompt, to the worker as to vLLM.
func TestReadsWhatVLLMReads(t *testing.T) {
	f := startFleet(t, fastConfig())
	base := f.Workers()[0].URL
	ten := strings.TrimSpace(strings.Repeat("word ", 10))
	msgs := func(text string) string { return `[{"role":"user","content":"` + text + `"}]` }
	promptTokens := func(body string) int {
		t.Helper()
		resp, data := post(t, base+"/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		var c simChat
		if err := json.Unmarshal(data, &c); err != nil || c.Usage == nil {
			t.Fatalf("%s: %v", data, err)
		}
		return c.Usage.PromptTokens
	}
	model := `"model":"` + DefaultServedModelName + `","max_tokens":1`
	alone := promptTokens(`{` + model + `,"messages":` + msgs(ten) + `}`)
	steered := promptTokens(`{` + model + `,"messages":` + msgs(ten) + `,"Messages":` + msgs(strings.Repeat("steer ", 4000)) + `}`)
	if alone > 30 || steered != alone {
		t.Errorf("prompt tokens: %d with Messages, %d for messages alone (about 20)", steered, alone)
	}
	if last := promptTokens(`{` + model + `,"messages":` + msgs(strings.Repeat("first ", 50)) + `,"messages":` + msgs(ten) + `}`); last != alone {
		t.Errorf("repeated messages: %d prompt tokens, want the last one's %d", last, alone)
	}
	// The estimate endpoint tells the APIs apart by the same rule.
	resp, data := post(t, base+"/sim/v1/estimate", `{`+model+`,"Messages":`+msgs(ten)+`,"prompt":"`+ten+`"}`)
	var est EstimateResponse
	if resp.StatusCode != 200 || json.Unmarshal(data, &est) != nil || est.PromptTokens >= alone {
		t.Errorf("estimate of a completions body with Messages: %d %s", resp.StatusCode, data)
	}
}

func TestChatCompletion(t *testing.T) {
	cfg := fastConfig()
	cfg.Workers = 2
	f := startFleet(t, cfg)
	url := f.Workers()[0].URL + "/v1/chat/completions"
	body := chatBody(longText(1, 600), 7, nil)

	resp, data := post(t, url, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var first simChat
	if err := json.Unmarshal(data, &first); err != nil {
		t.Fatal(err)
	}
	c := first.Choices
	if first.Object != "chat.completion" || !strings.HasPrefix(first.ID, "chatcmpl-") || first.Model != DefaultServedModelName ||
		len(c) != 1 || c[0].Message.Role != "assistant" || c[0].Message.Content == nil || *c[0].Message.Content == "" ||
		c[0].FinishReason == nil || *c[0].FinishReason != "length" {
		t.Fatalf("unexpected response: %s", data)
	}
	u := first.Usage
	if u == nil || u.CompletionTokens != 7 || u.PromptTokens < 400 || u.TotalTokens != u.PromptTokens+7 ||
		u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens != 0 {
		t.Fatalf("usage: %+v", u)
	}
	if first.SimTiming == nil || first.SimTiming.TTFT <= 0 || first.SimTiming.E2E < first.SimTiming.TTFT || first.SimTiming.Worker != 0 {
		t.Errorf("sim timing: %+v", first.SimTiming)
	}
	var other simChat
	if _, data := post(t, f.Workers()[1].URL+"/v1/chat/completions", body); json.Unmarshal(data, &other) != nil || other.SimTiming == nil || other.SimTiming.Worker != 1 {
		t.Errorf("worker 1's sim timing: %s", data)
	}

	_, data = post(t, url, body)
	var second simChat
	if err := json.Unmarshal(data, &second); err != nil {
		t.Fatal(err)
	}
	cached := second.Usage.PromptTokensDetails.CachedTokens
	if cached == 0 || cached >= second.Usage.PromptTokens || cached%16 != 0 {
		t.Errorf("repeat cached tokens = %d of %d", cached, second.Usage.PromptTokens)
	}
	if *second.Choices[0].Message.Content != *first.Choices[0].Message.Content {
		t.Error("generated text not deterministic")
	}
	if second.SimTiming.TTFT >= first.SimTiming.TTFT {
		t.Errorf("cached TTFT %v not below cold %v", second.SimTiming.TTFT, first.SimTiming.TTFT)
	}
}

func TestChatStreaming(t *testing.T) {
	f := startFleet(t, fastConfig())
	url := f.Workers()[0].URL + "/v1/chat/completions"
	tests := []struct {
		name  string
		usage bool
	}{{"with usage", true}, {"without usage", false}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			extra := map[string]any{"stream": true}
			if tc.usage {
				extra["stream_options"] = map[string]any{"include_usage": true}
			}
			resp, data := post(t, url, chatBody("Tell me about the river.", 5, extra))
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
			}
			events := sse(t, data)
			if events[len(events)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", events)
			}
			events = events[:len(events)-1]
			var chunks []openaiapi.ChatCompletionChunk
			for _, e := range events {
				var c openaiapi.ChatCompletionChunk
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("chunk %q: %v", e, err)
				}
				if c.Object != "chat.completion.chunk" {
					t.Errorf("chunk object %q", c.Object)
				}
				chunks = append(chunks, c)
			}
			if chunks[0].Choices[0].Delta.Role != "assistant" {
				t.Errorf("first chunk has no role: %s", events[0])
			}
			content := chunks[1:]
			if tc.usage {
				last := content[len(content)-1]
				content = content[:len(content)-1]
				if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != 5 ||
					last.Usage.PromptTokensDetails == nil {
					t.Errorf("usage chunk: %s", events[len(events)-1])
				}
			}
			if len(content) != 5 {
				t.Fatalf("%d content chunks, want one per token (5)", len(content))
			}
			var text strings.Builder
			for i, c := range content {
				fr := c.Choices[0].FinishReason
				if (i == 4) != (fr != nil) || (fr != nil && *fr != "length") {
					t.Errorf("chunk %d finish_reason %v", i, fr)
				}
				if c.Usage != nil {
					t.Errorf("content chunk %d carries usage", i)
				}
				text.WriteString(*c.Choices[0].Delta.Content)
			}

			_, whole := post(t, url, chatBody("Tell me about the river.", 5, nil))
			var nc openaiapi.ChatCompletion
			if err := json.Unmarshal(whole, &nc); err != nil {
				t.Fatal(err)
			}
			if text.String() != *nc.Choices[0].Message.Content {
				t.Errorf("streamed %q, non-streamed %q", text.String(), *nc.Choices[0].Message.Content)
			}
		})
	}
}

// TestStreamDeliversTokensAsGenerated reads a slow stream and checks the
// first chunks arrive before the request could have finished.
func TestStreamDeliversTokensAsGenerated(t *testing.T) {
	cfg := fastConfig()
	cfg.TimeScale = 1 // a decode step is ~30 ms of wall time
	f := startFleet(t, cfg)
	body, _ := json.Marshal(chatBody("Hello.", 1000, map[string]any{"stream": true}))
	req, _ := http.NewRequest(http.MethodPost, f.Workers()[0].URL+"/v1/chat/completions", strings.NewReader(string(body)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	var got int
	for got < 3 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d chunks: %v", got, err)
		}
		if strings.HasPrefix(line, "data: ") {
			got++
		}
	}
	// 1000 tokens at ≥31 ms each cannot be done yet: the chunks came while
	// generating. Cancel and check the engine dropped the request.
	cancel()
	waitFor(t, func() bool { return gauge(t, f.Workers()[0].URL, vllm.MetricNumRequestsRunning) == 0 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func gauge(t *testing.T, base, name string) float64 {
	t.Helper()
	fam := scrape(t, base)[name]
	if fam == nil || len(fam.Metric) != 1 {
		t.Fatalf("metric %s missing", name)
	}
	return fam.Metric[0].GetGauge().GetValue()
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.Label {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestMetrics(t *testing.T) {
	f := startFleet(t, fastConfig())
	base := f.Workers()[0].URL
	body := chatBody(longText(3, 300), 4, nil)
	post(t, base+"/v1/chat/completions", body)
	post(t, base+"/v1/chat/completions", body)

	fams := scrape(t, base)
	names := []string{
		vllm.MetricNumRequestsRunning, vllm.MetricNumRequestsWaiting, vllm.MetricKVCacheUsagePerc,
		vllm.MetricPrefixCacheQueries + "_total", vllm.MetricPrefixCacheHits + "_total",
		vllm.MetricTimeToFirstToken, vllm.MetricE2ERequestLatency,
		vllm.MetricPromptTokens + "_total", vllm.MetricGenerationTokens + "_total",
		vllm.MetricRequestSuccess + "_total", vllm.MetricNumPreemptions + "_total",
		vllm.MetricRequestQueueTime, vllm.MetricInterTokenLatency,
	}
	for _, n := range names {
		fam := fams[n]
		if fam == nil {
			t.Errorf("metric %s missing", n)
			continue
		}
		for _, m := range fam.Metric {
			l := labels(m)
			if l[vllm.LabelModelName] != DefaultServedModelName || l[vllm.LabelEngine] != "0" {
				t.Errorf("%s labels %v", n, l)
			}
		}
	}
	value := func(n string) float64 { return fams[n].Metric[0].GetCounter().GetValue() }
	if value(vllm.MetricPrefixCacheHits+"_total") <= 0 || value(vllm.MetricPrefixCacheQueries+"_total") <= value(vllm.MetricPrefixCacheHits+"_total") {
		t.Errorf("prefix cache counters: hits %v queries %v", value(vllm.MetricPrefixCacheHits+"_total"), value(vllm.MetricPrefixCacheQueries+"_total"))
	}
	if value(vllm.MetricGenerationTokens+"_total") != 8 {
		t.Errorf("generation tokens %v, want 8", value(vllm.MetricGenerationTokens+"_total"))
	}
	// The text format adds the +Inf bucket.
	if h := fams[vllm.MetricTimeToFirstToken].Metric[0].GetHistogram(); h.GetSampleCount() != 2 || len(h.Bucket) != len(ttftBuckets)+1 {
		t.Errorf("ttft histogram: %d samples, %d buckets", h.GetSampleCount(), len(h.Bucket))
	}
	for _, m := range fams[vllm.MetricRequestSuccess+"_total"].Metric {
		if l := labels(m); l[vllm.LabelFinishedReason] == "length" && m.GetCounter().GetValue() != 2 {
			t.Errorf("request_success{length} = %v", m.GetCounter().GetValue())
		}
	}
	info := fams[vllm.MetricCacheConfigInfo]
	if info == nil {
		t.Fatal("cache_config_info missing")
	}
	l := labels(info.Metric[0])
	fc := fastConfig()
	want := fmt.Sprint(fc.Engine().NumGPUBlocks)
	if l[vllm.CacheConfigLabelBlockSize] != "16" || l[vllm.CacheConfigLabelNumGPUBlks] != want || l[vllm.LabelEngine] != "0" ||
		info.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("cache_config_info labels %v (want num_gpu_blocks %s)", l, want)
	}
	// Like vLLM's process collector: the worker's start, which a restart
	// in place renews.
	start := fams[vllm.MetricProcessStartTime]
	if start == nil || len(start.Metric) != 1 || len(start.Metric[0].Label) != 0 {
		t.Fatalf("%s: %v", vllm.MetricProcessStartTime, start)
	}
	if v := start.Metric[0].GetGauge().GetValue(); v < float64(time.Now().Add(-time.Minute).Unix()) || v > float64(time.Now().Unix()+1) {
		t.Errorf("%s = %v, not the worker's start", vllm.MetricProcessStartTime, v)
	}
}

func TestCompletions(t *testing.T) {
	f := startFleet(t, fastConfig())
	url := f.Workers()[0].URL + "/v1/completions"
	tok := tokenizer.NewSimple()
	text := "Once upon a time, in the valley"
	tests := []struct {
		name   string
		prompt any
	}{
		{"string", text},
		{"array of one string", []string{text}},
		{"token ids", tok.Encode(text)},
		{"nested token ids", [][]uint32{tok.Encode(text)}},
	}
	var texts []string
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := post(t, url, map[string]any{"model": DefaultServedModelName, "prompt": tc.prompt, "max_tokens": 6})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			var c openaiapi.Completion
			if err := json.Unmarshal(data, &c); err != nil {
				t.Fatal(err)
			}
			if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || len(c.Choices) != 1 ||
				c.Usage == nil || c.Usage.PromptTokens != len(tok.Encode(text)) || c.Usage.CompletionTokens != 6 {
				t.Fatalf("response: %s", data)
			}
			texts = append(texts, c.Choices[0].Text)
		})
	}
	if len(slices.Compact(texts)) != 1 {
		t.Errorf("the same prompt in different forms generated different text: %q", texts)
	}

	t.Run("streaming", func(t *testing.T) {
		resp, data := post(t, url, map[string]any{"prompt": text, "max_tokens": 3, "stream": true,
			"stream_options": map[string]any{"include_usage": true}})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		events := sse(t, data)
		if len(events) != 5 || events[4] != "[DONE]" {
			t.Fatalf("want 3 token chunks, usage, [DONE]: %q", events)
		}
		var streamed strings.Builder
		for i, e := range events[:3] {
			var c openaiapi.Completion
			if err := json.Unmarshal([]byte(e), &c); err != nil {
				t.Fatal(err)
			}
			if (c.Choices[0].FinishReason != nil) != (i == 2) {
				t.Errorf("chunk %d finish_reason %v", i, c.Choices[0].FinishReason)
			}
			streamed.WriteString(c.Choices[0].Text)
		}
		var u openaiapi.Completion
		if err := json.Unmarshal([]byte(events[3]), &u); err != nil || len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 3 {
			t.Errorf("usage chunk %s (%v)", events[3], err)
		}
		if !strings.HasPrefix(texts[0], streamed.String()) {
			t.Errorf("streamed %q is not a prefix of %q", streamed.String(), texts[0])
		}
	})
}

func TestBadRequests(t *testing.T) {
	cfg := fastConfig()
	cfg.MaxModelLen = 512
	f := startFleet(t, cfg)
	base := f.Workers()[0].URL
	tests := []struct {
		name   string
		path   string
		body   any
		status int
		param  string
		code   string
	}{
		{"not json", "/v1/chat/completions", "{nope", 400, "", ""},
		{"not an object", "/v1/chat/completions", `[1,2]`, 400, "", ""},
		{"no messages", "/v1/chat/completions", map[string]any{"model": DefaultServedModelName}, 400, "messages", ""},
		{"bad role", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "robot", "content": "x"}}}, 400, "messages[0].role", ""},
		{"wrong type", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": "x"}}, "stream": "yes"}, 400, "stream", ""},
		{"unknown model", "/v1/chat/completions", map[string]any{"model": "gpt-9", "messages": []map[string]any{{"role": "user", "content": "x"}}}, 404, "model", "model_not_found"},
		{"n=2", "/v1/chat/completions", chatBody("x", 3, map[string]any{"n": 2}), 400, "n", ""},
		{"zero max tokens", "/v1/chat/completions", chatBody("x", 0, nil), 400, "max_tokens", ""},
		{"stream options without stream", "/v1/chat/completions", chatBody("x", 3, map[string]any{"stream_options": map[string]any{"include_usage": true}}), 400, "stream_options", ""},
		{"image part", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": map[string]any{"url": "http://x/y.png"}}}}}}, 400, "messages[0].content[1].type", ""},
		{"prompt too long", "/v1/chat/completions", chatBody(longText(1, 800), 3, nil), 400, "messages", ""},
		{"prompt plus completion too long", "/v1/chat/completions", chatBody("hello", 600, nil), 400, "max_tokens", ""},
		{"completion without prompt", "/v1/completions", map[string]any{"max_tokens": 3}, 400, "prompt", ""},
		{"batched prompts", "/v1/completions", map[string]any{"prompt": []string{"a", "b"}}, 400, "prompt", ""},
		{"negative token id", "/v1/completions", `{"prompt":[1,-2,3]}`, 400, "prompt", ""},
		{"empty prompt", "/v1/completions", map[string]any{"prompt": ""}, 400, "prompt", ""},
		{"completion unknown model", "/v1/completions", map[string]any{"model": "nope", "prompt": "x"}, 404, "model", "model_not_found"},
		{"estimate without api", "/sim/v1/estimate", map[string]any{"model": DefaultServedModelName}, 400, "api", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, data := post(t, base+tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			var eb openaiapi.ErrorBody
			if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Message == "" || eb.Error.Type == "" {
				t.Fatalf("not an OpenAI error: %s", data)
			}
			if got := deref(eb.Error.Param); got != tc.param {
				t.Errorf("param %q, want %q (%s)", got, tc.param, eb.Error.Message)
			}
			if got := deref(eb.Error.Code); got != tc.code {
				t.Errorf("code %q, want %q", got, tc.code)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestModelsHealthReset(t *testing.T) {
	cfg := fastConfig()
	cfg.ServedModelName = "qwen-3.6-27b, standard-model"
	f := startFleet(t, cfg)
	base := f.Workers()[0].URL

	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	data := raw["data"].([]any)
	if raw["object"] != "list" || len(data) != 2 {
		t.Fatalf("models: %v", raw)
	}
	m := data[1].(map[string]any)
	if m["id"] != "standard-model" || m["object"] != "model" || m["owned_by"] != "vllm" ||
		m["max_model_len"] != float64(cfg.MaxModelLen) || m["created"] == nil {
		t.Errorf("model entry: %v", m)
	}

	// The alias is served too.
	if resp, body := post(t, base+"/v1/chat/completions", map[string]any{"model": "standard-model",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}, "max_tokens": 1}); resp.StatusCode != 200 {
		t.Errorf("alias: %d %s", resp.StatusCode, body)
	}

	resp, err = http.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != 0 {
		t.Errorf("health: %d %q", resp.StatusCode, b)
	}

	if resp, body := post(t, base+"/reset_prefix_cache", ""); resp.StatusCode != 200 {
		t.Errorf("reset: %d %s", resp.StatusCode, body)
	}
	body := chatBody("hello", 1, nil)
	post(t, base+"/v1/chat/completions", body)
	resp2, _ := post(t, base+"/reset_prefix_cache", "")
	_, again := post(t, base+"/v1/chat/completions", body)
	var c openaiapi.ChatCompletion
	if err := json.Unmarshal(again, &c); err != nil {
		t.Fatal(err)
	}
	if resp2.StatusCode != 200 || c.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("after reset: status %d cached %d", resp2.StatusCode, c.Usage.PromptTokensDetails.CachedTokens)
	}
}

func TestEstimateEndpoint(t *testing.T) {
	f := startFleet(t, fastConfig())
	base := f.Workers()[0].URL
	body := chatBody(longText(5, 900), 4, nil)
	tests := []struct {
		name string
		body map[string]any
	}{
		{"implicit chat", body},
		{"explicit api", func() map[string]any { b := maps(body); b["api"] = "chat"; return b }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			waitIdle(t, base)
			resp, data := post(t, base+"/sim/v1/estimate", tc.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, data)
			}
			var est EstimateResponse
			if err := json.Unmarshal(data, &est); err != nil {
				t.Fatal(err)
			}
			// On an idle worker the TTFT does not depend on the arrival
			// instant, so the real request must get exactly the estimate
			// (arrivals are clamped to the last delivered step, so the
			// engine running ahead of the wall does not leak into it).
			_, got := post(t, base+"/v1/chat/completions", body)
			var c simChat
			if err := json.Unmarshal(got, &c); err != nil {
				t.Fatal(err)
			}
			if est.PromptTokens != c.Usage.PromptTokens || est.CachedTokens != c.Usage.PromptTokensDetails.CachedTokens ||
				est.TTFTSeconds != c.SimTiming.TTFT {
				t.Errorf("estimate %+v, got ttft %v usage %+v", est, c.SimTiming.TTFT, c.Usage)
			}
		})
	}
	resp, data := post(t, base+"/sim/v1/estimate", map[string]any{"api": "completions", "prompt": "hello there", "max_tokens": 2})
	if resp.StatusCode != 200 || !strings.Contains(string(data), `"ttft_seconds"`) {
		t.Errorf("completions estimate: %d %s", resp.StatusCode, data)
	}
}

// waitIdle waits until the worker runs and queues nothing.
func waitIdle(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gauge(t, base, vllm.MetricNumRequestsRunning)+gauge(t, base, vllm.MetricNumRequestsWaiting) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("worker never went idle")
		}
		time.Sleep(time.Millisecond)
	}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestWorkersOnConsecutivePorts(t *testing.T) {
	cfg := fastConfig()
	cfg.Workers = 3
	f := startFleet(t, cfg)
	ws := f.Workers()
	if len(ws) != 3 {
		t.Fatalf("%d workers", len(ws))
	}
	seen := map[string]bool{}
	for i, w := range ws {
		if w.ID != i || w.Model != DefaultServedModelName || seen[w.URL] || w.KVEndpoint != "" {
			t.Errorf("worker %d: %+v", i, w)
		}
		seen[w.URL] = true
		if resp, data := post(t, w.URL+"/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 1}); resp.StatusCode != 200 {
			t.Errorf("worker %d: %d %s", i, resp.StatusCode, data)
		}
	}
}

func TestCloseDrainsInFlightStream(t *testing.T) {
	cfg := fastConfig()
	cfg.TimeScale = 20 // ~1.5 ms per decode step: the stream outlives Close's start
	f, err := StartFleet(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	base := f.Workers()[0].URL
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":60,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || strings.Contains(string(rest), `"error"`) {
		t.Errorf("stream cut by shutdown: ...%s", rest[max(0, len(rest)-200):])
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Error("worker still serving after Close")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"workers", func(c *Config) { c.Workers = 0 }, "--workers"},
		{"port range", func(c *Config) { c.Port, c.Workers = 65535, 2 }, "--port"},
		{"model names", func(c *Config) { c.ServedModelName = " , " }, "--served-model-name"},
		{"time scale", func(c *Config) { c.TimeScale = 0 }, "--time-scale"},
		{"utilization", func(c *Config) { c.GPUMemoryUtilization = 1.5 }, "--gpu-memory-utilization"},
		{"encoding", func(c *Config) { c.KVEventsEncoding = "json" }, "--kv-events-encoding"},
		{"replay format", func(c *Config) { c.KVReplayFormat = "v2" }, `--kv-replay-format "v2": want topic`},
		{"empty replay format", func(c *Config) { c.KVReplayFormat = "" }, "--kv-replay-format"},
		{"kv config", func(c *Config) { c.KVEventsConfig = `{"enable_kv_cache_events":true,"endpoint":"udp://x"}` }, "--kv-events-config"},
		{"kv config unknown field", func(c *Config) { c.KVEventsConfig = `{"bogus":1}` }, "--kv-events-config"},
		{"model len beyond cache", func(c *Config) { c.MaxModelLen = 100_000 }, "max model len"},
		{"tiny cache", func(c *Config) { c.NumGPUBlocksOverride = 10 }, "max model len"},
		{"default max tokens", func(c *Config) { c.DefaultMaxTokens = 0 }, "--default-max-tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want mention of %q", err, tc.want)
			}
		})
	}
}
