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

// TestStreamCut: a stream cut anywhere before its messageStop is an
// error, never a clean end; a message whose prelude claims more than
// maxEventBytes is refused before it is read; a cut after messageStop
// still ends with [DONE].
func TestStreamCut(t *testing.T) {
	var buf bytes.Buffer
	var stopAt int
	for _, ev := range bedrocktest.Events(bedrocktest.Reply{Text: []string{"a", "b"}, StopReason: "end_turn"}) {
		if err := bedrocktest.Encode(&buf, ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "messageStop" {
			stopAt = buf.Len()
		}
	}
	full := buf.Bytes()
	for cut := 0; cut < stopAt; cut++ {
		s := newStream(io.NopCloser(bytes.NewReader(full[:cut])), "m", true, time.Unix(0, 0))
		out, err := io.ReadAll(s)
		if err == nil || strings.Contains(string(out), "[DONE]") {
			t.Fatalf("cut at %d of %d: err %v, output %q", cut, len(full), err, out)
		}
	}
	for cut := stopAt; cut <= len(full); cut++ {
		s := newStream(io.NopCloser(bytes.NewReader(full[:cut])), "m", true, time.Unix(0, 0))
		out, err := io.ReadAll(s)
		if err != nil || !strings.HasSuffix(string(out), "data: [DONE]\n\n") {
			t.Fatalf("cut at %d of %d (after messageStop): err %v, output %q", cut, len(full), err, out)
		}
	}
	huge := []byte{0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	s := newStream(io.NopCloser(io.MultiReader(bytes.NewReader(huge), neverEnds{})), "m", false, time.Unix(0, 0))
	if _, err := io.ReadAll(s); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("huge prelude: %v", err)
	}
}

// neverEnds is an endless body of zeros.
type neverEnds struct{}

func (neverEnds) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
