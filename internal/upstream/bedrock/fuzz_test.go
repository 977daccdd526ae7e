package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
)

// FuzzStream feeds arbitrary bytes to the ConverseStream decoding path as
// the upstream body: it must not panic, and what it writes is always
// whole SSE events of JSON chunks, ending in [DONE] only on a clean end.
func FuzzStream(f *testing.F) {
	for _, rep := range []bedrocktest.Reply{
		{Text: []string{"a", "b"}, Usage: bedrocktest.Usage{Input: 1, Output: 2}, StopReason: "end_turn"},
		{ToolUses: []bedrocktest.ToolUse{{ID: "t", Name: "f", Input: `{"x":1}`}}, StopReason: "tool_use"},
		{Text: []string{"x"}, Exception: "ThrottlingException"},
	} {
		var buf bytes.Buffer
		for _, ev := range bedrocktest.Events(rep) {
			if err := bedrocktest.Encode(&buf, ev); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(buf.Bytes(), true)
		f.Add(buf.Bytes()[:buf.Len()/2], false)
	}
	f.Fuzz(func(t *testing.T, data []byte, usage bool) {
		s := newStream(io.NopCloser(bytes.NewReader(data)), "m", usage, time.Unix(0, 0))
		out, err := io.ReadAll(io.LimitReader(s, 64<<20))
		if err == nil != strings.HasSuffix(string(out), "data: [DONE]\n\n") {
			t.Fatalf("err %v with output ending %q", err, out[max(0, len(out)-20):])
		}
		if err != nil && errors.Is(err, io.EOF) {
			t.Fatalf("EOF as an error: %v", err)
		}
		for _, ev := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
			if ev == "" {
				continue
			}
			data, ok := strings.CutPrefix(ev, "data: ")
			if !ok || strings.Contains(data, "\n") {
				t.Fatalf("not one data line: %q", ev)
			}
			if data != "[DONE]" && !json.Valid([]byte(data)) {
				t.Fatalf("not JSON: %q", data)
			}
		}
	})
}
