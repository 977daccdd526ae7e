package devenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/switchyard-dev/switchyard/internal/devenv"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
)

// TestBurstToBedrockAndBack runs deploy/examples' burst policy as its
// comment says, with the real adapters: when glm-5.3's one local worker
// (sim-2, one sequence at a time) has more than 2 prompts queued, requests
// go to the provider bedrock — through the gateway's Bedrock adapter, over
// SigV4, to the fake Bedrock runtime `switchyard dev` runs for it, which
// checks every signature — and once the queue has drained they are served
// locally again.
func TestBurstToBedrockAndBack(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	s := startCatalogStack(t)
	fake := s.BedrockFake("bedrock")
	if fake == nil {
		t.Fatal("switchyard dev runs no Bedrock fake for the catalog's provider bedrock")
	}
	c := client(s)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The burst: long answers, so the local worker's queue builds, half
	// of them streamed; once the overflow has begun, a few more of each
	// kind, which find the queue still long.
	const first, more, maxTokens = 16, 4, 96
	results := make([]answer, first+more)
	var wg sync.WaitGroup
	send := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = ask(ctx, c, fmt.Sprintf("Explain step by step why the sky is blue, burst request %d.", i), maxTokens, i%2 == 0)
			}()
		}
	}
	send(0, first)
	testkit.Eventually(t, 60*time.Second, "the overflow reaching bedrock", func() bool { return fake.Counts().Requests > 0 })
	send(first, first+more)
	wg.Wait()

	var local, remote, remoteStreams int
	for _, r := range results {
		r.check(t, maxTokens)
		switch r.model {
		case glm:
			local++
		case glmBedrock:
			remote++
			if r.stream {
				remoteStreams++
			}
		}
	}
	t.Logf("burst of %d: %d served by the local worker, %d by bedrock (%d of them streamed)", len(results), local, remote, remoteStreams)
	if local == 0 || remoteStreams == 0 || remoteStreams == remote {
		t.Fatalf("burst of %d: %d served locally, %d by bedrock of which %d streamed; want some locally (until the worker queues more than 2) and the overflow on bedrock, streamed and not", len(results), local, remote, remoteStreams)
	}
	checkFake(t, fake, remote)

	// Once sim-2's queue has drained, requests stay local.
	testkit.Eventually(t, 60*time.Second, "sim-2's queue drained in the router's view", func() bool {
		e, ok := endpoint(t, s, "sim-2")
		return ok && e.waiting == 0 && e.running == 0
	})
	const after = 6
	for i := range after {
		r := ask(ctx, c, fmt.Sprintf("Explain step by step why the sky is blue, request %d after the burst.", i), 8, i%2 == 0)
		r.check(t, 8)
		if r.model != glm {
			t.Errorf("request %d after the burst served as %q, want the local %q", i, r.model, glm)
		}
	}
	if n := fake.Counts().Requests; n != remote {
		t.Errorf("bedrock received %d requests in all, %d during the burst: it still got some after the queue drained", n, remote)
	}
	t.Logf("after the burst: %d requests, all local; bedrock's count stayed at %d", after, fake.Counts().Requests)
}

// answer is one request's outcome, as the client saw it.
type answer struct {
	prompt  string
	stream  bool
	err     error
	model   string
	content string
	finish  string
	usage   openai.CompletionUsage
}

// ask sends one chat completion for glm-5.3, streamed (asking for usage)
// or not.
func ask(ctx context.Context, c openai.Client, prompt string, maxTokens int64, stream bool) answer {
	p := openai.ChatCompletionNewParams{
		Model: glm,
		// Not a simple prompt: smart-semantic-routing would let a simple
		// one go to qwen-3.6-27b.
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(maxTokens),
	}
	a := answer{prompt: prompt, stream: stream}
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			a.err = err
			return a
		}
		a.model, a.usage = resp.Model, resp.Usage
		if len(resp.Choices) != 1 {
			a.err = fmt.Errorf("%d choices", len(resp.Choices))
			return a
		}
		a.content, a.finish = resp.Choices[0].Message.Content, resp.Choices[0].FinishReason
		return a
	}
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, p)
	defer st.Close()
	var content strings.Builder
	for st.Next() {
		ch := st.Current()
		if a.model == "" {
			a.model = ch.Model
		}
		if len(ch.Choices) > 0 {
			content.WriteString(ch.Choices[0].Delta.Content)
			if f := ch.Choices[0].FinishReason; f != "" {
				a.finish = f
			}
		}
		if ch.Usage.TotalTokens > 0 {
			a.usage = ch.Usage
		}
	}
	a.err, a.content = st.Err(), content.String()
	return a
}

// check: the answer is what its server makes of the prompt — the
// simulated vLLM worker maxTokens tokens cut at the length, the Bedrock
// fake its echo of the prompt (bedrocktest.Echo: 7 prompt and 3
// completion tokens) ended as a stop.
func (a answer) check(t *testing.T, maxTokens int64) {
	t.Helper()
	what := "non-streamed"
	if a.stream {
		what = "streamed"
	}
	if a.err != nil {
		t.Errorf("%s request %q: %v", what, a.prompt, a.err)
		return
	}
	switch a.model {
	case glm:
		if a.content == "" || a.finish != "length" || a.usage.CompletionTokens != maxTokens || a.usage.PromptTokens <= 0 {
			t.Errorf("%s answer of the local worker: content %q, finish %q, usage %+v; want %d tokens cut at the length", what, a.content, a.finish, a.usage, maxTokens)
		}
	case glmBedrock:
		if want := "echo: " + a.prompt; a.content != want || a.finish != "stop" || a.usage.PromptTokens != 7 || a.usage.CompletionTokens != 3 {
			t.Errorf("%s answer of bedrock: content %q, finish %q, usage %+v; want %q, stop, 7+3 tokens", what, a.content, a.finish, a.usage, want)
		}
	default:
		t.Errorf("%s request %q answered as model %q, want %q (local) or %q (bedrock)", what, a.prompt, a.model, glm, glmBedrock)
	}
}

// checkFake: the fake received exactly the requests bedrock answered,
// each signed correctly for glm-5.3's Bedrock model id.
func checkFake(t *testing.T, fake *bedrocktest.Server, want int) {
	t.Helper()
	got := fake.Counts()
	if got.Requests != want || got.Refused != 0 {
		t.Errorf("the Bedrock fake received %d requests (%d with a signature it refused), want the %d bedrock answered, all signed correctly", got.Requests, got.Refused, want)
	}
	streams := 0
	for _, r := range fake.Requests() {
		if r.SignatureError != "" {
			t.Errorf("request to %s: signature refused: %s", r.RawPath, r.SignatureError)
		}
		if r.ModelID != glmBedrock {
			t.Errorf("request to %s: model id %q, want %q", r.RawPath, r.ModelID, glmBedrock)
		}
		if r.Stream {
			streams++
		}
	}
	t.Logf("the Bedrock fake verified %d SigV4 signatures (%d ConverseStream, %d Converse)", got.Requests, streams, got.Requests-streams)
}

// load is an endpoint's load as the router last scraped it.
type load struct{ waiting, running int64 }

// endpoint is the router's view of endpoint id.
func endpoint(t *testing.T, s *devenv.Stack, id string) (load, bool) {
	t.Helper()
	resp, err := http.Get(s.RouterURL() + "/v1/endpoints")
	if err != nil {
		t.Fatalf("router endpoints: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		Endpoints []struct {
			ID               string
			Waiting, Running json.Number // int64 is a JSON string in protojson
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("router endpoints: %v", err)
	}
	for _, e := range out.Endpoints {
		if e.ID == id {
			w, _ := e.Waiting.Int64()
			r, _ := e.Running.Int64()
			return load{waiting: w, running: r}, true
		}
	}
	return load{}, false
}
