package classify_test

import (
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/chattext"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
)

// TestTextReadsTheParsedPrompt: Text takes the request the prompt reader
// parsed when there is one (the body is not read again), the body when
// there is none, and is read once per decision.
func TestTextReadsTheParsedPrompt(t *testing.T) {
	parsed, apiErr := openaiapi.ParseChatCompletionRequest([]byte(`{"model":"m","messages":[{"role":"user","content":"parsed"}]}`))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"body"}]}`)
	var r classify.Request
	for _, tc := range []struct {
		name   string
		prompt prompt.Prompt
		want   string
	}{
		{"parsed", prompt.Prompt{Kind: prompt.Tokens, Chat: parsed}, "parsed"},
		{"unparsed", prompt.Prompt{}, "body"},
	} {
		r.Reset()
		r.API, r.Body, r.Prompt = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, body, tc.prompt
		for range 2 {
			segs, err := r.Text()
			if want := []chattext.Segment{{Role: chattext.User, Text: tc.want}}; err != nil || !slices.Equal(segs, want) {
				t.Fatalf("%s: Text %q %v, want %q", tc.name, segs, err, want)
			}
			r.Body = nil // read already: the second call does not look
		}
	}
}
