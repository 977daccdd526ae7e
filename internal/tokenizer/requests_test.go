package tokenizer

import (
	"testing"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// TestContinueFinalMessage: the simulator's format ends inside the final
// message, so the worker and the router continue it the same way.
func TestContinueFinalMessage(t *testing.T) {
	req, apiErr := openaiapi.ParseChatCompletionRequest([]byte(`{"messages":[{"role":"user","content":"Tell a story."},` +
		`{"role":"assistant","content":"Once upon a time, "}],"continue_final_message":true,"add_generation_prompt":false}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	got, err := ChatText(NewSimple(), req)
	want := IMStart + "user\nTell a story." + IMEnd + "\n" + IMStart + "assistant\nOnce upon a time, "
	if err != nil || got != want {
		t.Fatalf("ChatText = %q, %v\nwant %q", got, err, want)
	}
	for _, tc := range []struct{ rendered, final, want string }{
		{"<a>x y</a>", "x y", "<a>x y"},
		{"<a>x y </a>", "x y ", "<a>x y "},        // trailing space kept by the template
		{"<a>x y</a>", "x y ", "<a>x y"},          // trimmed by the template
		{"<a> x y </a>", " x y ", "<a> x y"},      // leading space: cut after the stripped text
		{"<a>x</a><a>x</a>", "x", "<a>x</a><a>x"}, // the last occurrence
		{"<a></a>", "", "<a></a>"},
		{"<a>\x1cx\x1c</a>", "\x1cx\x1c", "<a>\x1cx"}, // Python strips U+001C
	} {
		got, err := ContinueFinal(tc.rendered, []Message{{Role: "assistant", Content: tc.final}})
		if err != nil || got != tc.want {
			t.Errorf("ContinueFinal(%q, %q) = %q, %v; want %q", tc.rendered, tc.final, got, err, tc.want)
		}
	}
	if _, err := ContinueFinal("<a>y</a>", []Message{{Content: "x"}}); err == nil {
		t.Error("a final message missing from the render was continued")
	}
}
