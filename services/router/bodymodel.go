package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// replaceModel returns a copy of the JSON object body with its top-level
// "model" string replaced by model: the bytes around the value are kept
// as they are (no re-encoding of the prompt), so what the upstream sees
// differs from what the client sent only in the model name. When the key
// appears more than once the last one is replaced, as the last one is
// what JSON decoders (Go's, Python's) keep.
func replaceModel(body []byte, model string) ([]byte, error) {
	start, end, err := modelSpan(body)
	if err != nil {
		return nil, err
	}
	quoted, err := json.Marshal(model)
	if err != nil {
		return nil, fmt.Errorf("encode model: %w", err)
	}
	out := make([]byte, 0, len(body)-(end-start)+len(quoted))
	out = append(out, body[:start]...)
	out = append(out, quoted...)
	return append(out, body[end:]...), nil
}

var errNoModel = errors.New(`no top-level "model" string`)

// modelSpan finds the byte range of the top-level "model" value.
func modelSpan(body []byte) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	tok, err := dec.Token()
	if err != nil {
		return 0, 0, fmt.Errorf("read body: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, 0, errors.New("body is not a JSON object")
	}
	start, end = -1, -1
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("read body: %w", err)
		}
		key, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return 0, 0, fmt.Errorf("read body: %w", err)
		}
		if key != "model" {
			continue
		}
		if len(raw) == 0 || raw[0] != '"' {
			return 0, 0, errNoModel
		}
		end = int(dec.InputOffset())
		start = end - len(raw)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return 0, 0, errors.New("body is not a complete JSON object")
	}
	if start < 0 || !bytes.Equal(body[start:end], bytes.TrimSpace(body[start:end])) {
		return 0, 0, errNoModel
	}
	return start, end, nil
}
