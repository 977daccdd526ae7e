package drills

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// outcome is how one streamed request ended, as the client saw it.
type outcome string

const (
	// ok: a 200 stream that ended with a finish_reason and [DONE].
	ok outcome = "ok"
	// refused: an error answer (status >= 400) in the API's shape.
	refused outcome = "refused"
	// streamError: an error event inside a 200 stream.
	streamError outcome = "stream-error"
	// truncated: a 200 stream that stopped without a finish_reason or an
	// error event (a bare close).
	truncated outcome = "truncated"
	// failed: no HTTP answer at all (connection refused or reset).
	failed outcome = "failed"
	// cut: ended by the load's own stop, not by the fleet.
	cut outcome = "cut"
)

// record is one request of the steady load.
type record struct {
	gateway    int
	start, end time.Time
	// firstToken is when the first content arrived (zero: none).
	firstToken time.Time
	// maxGap is the longest wait between two chunks of the stream.
	maxGap  time.Duration
	id      string
	status  int
	outcome outcome
	err     string
}

// load is a steady streaming load over every gateway: clients
// concurrent clients, each sending one streamed chat request after the
// other with the official OpenAI client, round-robin over the gateways.
type load struct {
	clients []openai.Client
	prompts []string
	maxTok  int64

	mu      sync.Mutex
	records []record
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// shared prefixes so routing has cached prefixes to follow.
var loadPrompts = []string{
	"You are a careful assistant for a shipping company. Answer in one paragraph. ",
	"You are a terse reviewer of Go code. Point out one problem at most. ",
	"You summarise meeting notes into three bullet points for busy people. ",
}

func startLoad(t *testing.T, f *fleet, clients int) *load {
	t.Helper()
	return startLoadOf(t, f, clients, 48)
}

// startLoadOf is startLoad with answers of maxTok tokens.
func startLoadOf(t *testing.T, f *fleet, clients int, maxTok int64) *load {
	t.Helper()
	l := &load{prompts: loadPrompts, maxTok: maxTok}
	for _, g := range f.gateways {
		l.clients = append(l.clients, openai.NewClient(
			option.WithBaseURL(g.httpURL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0),
			option.WithRequestTimeout(5*time.Minute)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for c := range clients {
		l.wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				gw := (c + n) % len(l.clients)
				prompt := l.prompts[(c+n)%len(l.prompts)] + fmt.Sprintf("Question %d from client %d: what should I do next?", n, c)
				r := l.one(ctx, gw, prompt)
				if ctx.Err() != nil && r.outcome != ok {
					// Cut by the end of the load, not by the fleet; its
					// usage event is still due.
					if r.id != "" {
						r.outcome = cut
						l.add(r)
					}
					return
				}
				l.add(r)
				if r.outcome == failed {
					// Nothing answered: do not spin.
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		})
	}
	t.Cleanup(l.stop)
	return l
}

func (l *load) add(r record) {
	l.mu.Lock()
	l.records = append(l.records, r)
	l.mu.Unlock()
}

// one sends one streamed request through gateway gw.
func (l *load) one(ctx context.Context, gw int, prompt string) record {
	r := record{gateway: gw, start: time.Now()}
	var resp *http.Response
	stream := l.clients[gw].Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     model,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(l.maxTok),
	}, option.WithResponseInto(&resp))
	finished := false
	last := r.start
	for stream.Next() {
		now := time.Now()
		if gap := now.Sub(last); gap > r.maxGap {
			r.maxGap = gap
		}
		last = now
		ch := stream.Current()
		if r.firstToken.IsZero() && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != "" {
			r.firstToken = now
		}
		if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
			finished = true
		}
	}
	err := stream.Err()
	_ = stream.Close()
	r.end = time.Now()
	if resp != nil {
		r.status = resp.StatusCode
		r.id = resp.Header.Get("X-Request-Id")
	}
	var apiErr *openai.Error
	var sErr *ssestream.StreamError
	switch {
	case err == nil && finished:
		r.outcome = ok
	case err == nil:
		r.outcome = truncated
	case errors.As(err, &apiErr):
		r.outcome, r.status = refused, apiErr.StatusCode
	case errors.As(err, &sErr):
		r.outcome = streamError
	case resp != nil && resp.StatusCode == http.StatusOK:
		r.outcome = truncated
	default:
		r.outcome = failed
	}
	if err != nil {
		r.err = err.Error()
	}
	return r
}

// stop ends the load and waits for the requests in flight.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// snapshot is every finished request so far.
func (l *load) snapshot() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// between is the requests that started in [from, to).
func between(rs []record, from, to time.Time) []record {
	var out []record
	for _, r := range rs {
		if !r.start.Before(from) && r.start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// failures is the requests whose outcome is not ok.
func failures(rs []record) []record {
	var out []record
	for _, r := range rs {
		if r.outcome != ok && r.outcome != cut {
			out = append(out, r)
		}
	}
	return out
}

// describe lists records for a failure message (the first few).
func describe(rs []record) string {
	var b strings.Builder
	for i, r := range rs {
		if i == 8 {
			fmt.Fprintf(&b, "  ... and %d more\n", len(rs)-i)
			break
		}
		fmt.Fprintf(&b, "  gateway-%d %s +%v %s status %d id %q: %s\n", r.gateway, r.start.Format("15:04:05.000"),
			r.end.Sub(r.start).Round(time.Millisecond), r.outcome, r.status, r.id, r.err)
	}
	return b.String()
}

// waitRequests waits until n more requests have finished, so a drill's
// phase has load in it, and fails the test if they do not within d.
func (l *load) waitRequests(t *testing.T, n int, d time.Duration) {
	t.Helper()
	start := len(l.snapshot())
	deadline := time.Now().Add(d)
	for len(l.snapshot()) < start+n {
		if time.Now().After(deadline) {
			t.Fatalf("load: fewer than %d requests finished in %v", n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
