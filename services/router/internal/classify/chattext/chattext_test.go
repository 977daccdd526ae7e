package chattext_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/chattext"
)

func TestSegments(t *testing.T) {
	const (
		chat  = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS
		compl = routerv1.ApiKind_API_KIND_COMPLETIONS
		unset = routerv1.ApiKind_API_KIND_UNSPECIFIED
	)
	U, O := chattext.User, chattext.Other
	for _, tc := range []struct {
		name string
		api  routerv1.ApiKind
		body string
		want []chattext.Segment
		err  bool
	}{
		{"chat", chat, `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},` +
			`{"role":"assistant","content":null,"reasoning":"r","tool_calls":[{"id":"1"}]},` +
			`{"role":"user","content":[{"type":"text","text":"p1"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"p2"}]}],` +
			`"tools":[{"type":"function"}],"documents":[{"text":"d"}]}`,
			[]chattext.Segment{{O, "s"}, {U, "u"}, {O, "r"}, {O, `[{"id":"1"}]`}, {U, "p1"}, {U, "p2"}, {O, `[{"type":"function"}]`}, {O, `[{"text":"d"}]`}}, false},
		{"the key rule is vLLM's", chat, `{"model":"m","messages":[{"role":"user","content":"a"}],"Messages":[{"role":"user","content":"b"}]}`,
			[]chattext.Segment{{U, "a"}}, false},
		{"completions batch", compl, `{"model":"m","prompt":["a","b"]}`, []chattext.Segment{{U, "a"}, {U, "b"}}, false},
		{"sniffed chat", unset, `{"model":"m","messages":[{"role":"user","content":"a"}]}`, []chattext.Segment{{U, "a"}}, false},
		{"sniffed completions", unset, `{"model":"m","prompt":"a"}`, []chattext.Segment{{U, "a"}}, false},
		{"token ids", compl, `{"model":"m","prompt":[1,2]}`, nil, true},
		{"invalid", chat, `{"model":`, nil, true},
		{"empty", chat, ` `, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := chattext.Segments(tc.api, []byte(tc.body), nil)
			if tc.err != (err != nil) || err != nil && !errors.Is(err, chattext.ErrUnreadable) {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("segments %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFromParsedIsSegments: the text of a request the router parsed is
// the text of its body parsed here.
func TestFromParsedIsSegments(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"p"}]},` +
		`{"role":"assistant","reasoning_content":"r","tool_calls":[{"id":"1"}]}],"tools":[{"type":"function"}]}`
	creq, apiErr := openaiapi.ParseChatCompletionRequest([]byte(chat))
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	want, err := chattext.Segments(routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS, []byte(chat), nil)
	if got := chattext.FromChat(creq, nil); err != nil || len(want) != 5 || !slices.Equal(got, want) {
		t.Fatalf("FromChat %q, Segments %q (%v)", got, want, err)
	}
	for _, body := range []string{`{"model":"m","prompt":["a","b"]}`, `{"model":"m","prompt":[1,2]}`} {
		req, apiErr := openaiapi.ParseCompletionRequest([]byte(body))
		if apiErr != nil {
			t.Fatal(apiErr.Message)
		}
		got, gotErr := chattext.FromCompletion(req, nil)
		want, wantErr := chattext.Segments(routerv1.ApiKind_API_KIND_COMPLETIONS, []byte(body), nil)
		if !slices.Equal(got, want) || !errors.Is(gotErr, wantErr) {
			t.Fatalf("%s: FromCompletion %q %v, Segments %q %v", body, got, gotErr, want, wantErr)
		}
	}
}
