// Package apibody reads and edits OpenAI request and response bodies as
// little as the gateway needs: the fields routing depends on, a byte splice to
// ask the upstream for usage, and the usage object of a response or stream
// chunk. Everything else in a body passes through untouched.
package apibody

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/jsonspan"
)

// API is the OpenAI endpoint a body was sent to.
type API uint8

// APIs the gateway parses.
const (
	Chat        API = iota + 1 // POST /v1/chat/completions
	Completions                // POST /v1/completions
)

// MaxModelLen bounds the model name; longer names are no model anyone serves
// and would only bloat logs and router requests.
const MaxModelLen = 256

// Request is what routing needs from a request body.
type Request struct {
	Model  string
	Stream bool
	// IncludeUsage is stream_options.include_usage as the client sent it.
	IncludeUsage bool
}

// Parse validates body as a request to api and extracts the routing fields.
// JSON is validated in full; fields other than model, stream,
// stream_options.include_usage and messages/prompt are not looked at. When a
// key repeats, the last occurrence counts, as in the Python server behind
// vLLM. Errors are client-facing 400s.
func Parse(api API, body []byte) (Request, *openaiapi.APIError) {
	var model, stream, streamOpts, input jsonspan.Member
	var hasModel, hasStream, hasStreamOpts, hasInput bool
	inputKey := "messages"
	if api == Completions {
		inputKey = "prompt"
	}
	kind, _, err := jsonspan.Members(body, func(m jsonspan.Member) {
		switch {
		case m.KeyIs("model"):
			model, hasModel = m, true
		case m.KeyIs("stream"):
			stream, hasStream = m, true
		case m.KeyIs("stream_options"):
			streamOpts, hasStreamOpts = m, true
		case m.KeyIs(inputKey):
			input, hasInput = m, true
		}
	})
	if err != nil {
		if len(body) == 0 {
			return Request{}, openaiapi.InvalidRequest("", "request body is empty: expected a JSON object")
		}
		var se *jsonspan.SyntaxError
		if errors.As(err, &se) {
			return Request{}, openaiapi.InvalidRequest("", "could not parse the JSON body of the request: "+se.Error())
		}
		return Request{}, openaiapi.InvalidRequest("", "could not parse the JSON body of the request")
	}
	if kind != jsonspan.Object {
		return Request{}, openaiapi.InvalidRequest("", "the request body must be a JSON object, but got "+describe(kind)+" instead")
	}

	var req Request
	if !hasModel || model.Kind == jsonspan.Null {
		return Request{}, openaiapi.InvalidRequest("model", "you must provide a model parameter")
	}
	if model.Kind != jsonspan.String {
		return Request{}, typeError("model", jsonspan.String, model.Kind)
	}
	name, ok := unquote(model.Value)
	switch {
	case !ok:
		return Request{}, openaiapi.InvalidRequest("model", "invalid string for 'model'")
	case name == "":
		return Request{}, openaiapi.InvalidRequest("model", "you must provide a model parameter")
	case len(name) > MaxModelLen:
		return Request{}, openaiapi.InvalidRequest("model", fmt.Sprintf("'model' is too long: %d bytes, at most %d", len(name), MaxModelLen))
	case !utf8.ValidString(name):
		return Request{}, openaiapi.InvalidRequest("model", "'model' is not valid UTF-8")
	}
	req.Model = name

	if hasStream {
		switch stream.Kind {
		case jsonspan.Bool:
			req.Stream = stream.Value[0] == 't'
		case jsonspan.Null:
		default:
			return Request{}, typeError("stream", jsonspan.Bool, stream.Kind)
		}
	}
	if hasStreamOpts {
		switch streamOpts.Kind {
		case jsonspan.Object:
			inc, found, _ := lastMember(streamOpts.Value, "include_usage")
			if found {
				switch inc.Kind {
				case jsonspan.Bool:
					req.IncludeUsage = inc.Value[0] == 't'
				case jsonspan.Null:
				default:
					return Request{}, typeError("stream_options.include_usage", jsonspan.Bool, inc.Kind)
				}
			}
		case jsonspan.Null:
		default:
			return Request{}, typeError("stream_options", jsonspan.Object, streamOpts.Kind)
		}
	}

	if !hasInput || input.Kind == jsonspan.Null {
		return Request{}, openaiapi.InvalidRequest(inputKey, fmt.Sprintf("missing required parameter: '%s'", inputKey))
	}
	switch api {
	case Chat:
		if input.Kind != jsonspan.Array {
			return Request{}, typeError(inputKey, jsonspan.Array, input.Kind)
		}
		if isEmptyArray(input.Value) {
			return Request{}, openaiapi.InvalidRequest(inputKey, "'messages' must contain at least one message")
		}
	case Completions:
		// vLLM accepts a string, a list of strings, a list of token ids or a
		// list of lists of token ids; the element shapes are vLLM's to check.
		if input.Kind != jsonspan.String && input.Kind != jsonspan.Array {
			return Request{}, openaiapi.InvalidRequest(inputKey,
				"invalid type for 'prompt': expected a string or an array, but got "+describe(input.Kind)+" instead")
		}
	}
	return req, nil
}

func typeError(param string, want, got jsonspan.Kind) *openaiapi.APIError {
	return openaiapi.InvalidRequest(param, fmt.Sprintf("invalid type for '%s': expected %s, but got %s instead",
		param, describe(want), describe(got)))
}

// describe names a kind with its article, as in OpenAI's error messages.
func describe(k jsonspan.Kind) string {
	switch k {
	case jsonspan.Object, jsonspan.Array:
		return "an " + k.String()
	case jsonspan.Null:
		return "null"
	}
	return "a " + k.String()
}

// lastMember finds the last member called key of the object obj, which must
// be valid JSON.
func lastMember(obj []byte, key string) (jsonspan.Member, bool, int) {
	var found jsonspan.Member
	var ok bool
	_, closeBrace, err := jsonspan.Members(obj, func(m jsonspan.Member) {
		if m.KeyIs(key) {
			found, ok = m, true
		}
	})
	if err != nil {
		return jsonspan.Member{}, false, -1
	}
	return found, ok, closeBrace
}

func isEmptyArray(v []byte) bool {
	for _, c := range v[1 : len(v)-1] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// InjectIncludeUsage returns a copy of body (a request already accepted by
// Parse) in which stream_options.include_usage is true, changing only the
// bytes it must: it replaces a null or false value, inserts the key into an
// existing stream_options object, or appends a stream_options member to the
// top-level object. It reports false, and returns body unchanged, when the
// body has no place for the option (not an object, or a stream_options of
// the wrong type).
func InjectIncludeUsage(body []byte) ([]byte, bool) {
	opts, found, closeBrace := lastMember(body, "stream_options")
	if closeBrace < 0 {
		return body, false
	}
	if !found {
		// Append as the last member so no existing byte moves but the brace.
		sep := ","
		if onlySpaceBetween(body, '{', closeBrace) {
			sep = ""
		}
		return splice(body, closeBrace, closeBrace, sep+`"stream_options":{"include_usage":true}`), true
	}
	switch opts.Kind {
	case jsonspan.Null:
		return splice(body, opts.Offset, opts.Offset+len(opts.Value), `{"include_usage":true}`), true
	case jsonspan.Object:
		inc, ok, _ := lastMember(opts.Value, "include_usage")
		if ok {
			if inc.Kind == jsonspan.Bool && inc.Value[0] == 't' {
				return body, true
			}
			at := opts.Offset + inc.Offset
			return splice(body, at, at+len(inc.Value), "true"), true
		}
		ins := `"include_usage":true,`
		if isEmptyObject(opts.Value) {
			ins = `"include_usage":true`
		}
		return splice(body, opts.Offset+1, opts.Offset+1, ins), true
	}
	return body, false
}

func isEmptyObject(v []byte) bool { return isEmptyArray(v) }

// onlySpaceBetween reports whether only whitespace lies between the last
// opening byte open before end and end (the top-level object is empty).
func onlySpaceBetween(body []byte, open byte, end int) bool {
	for i := end - 1; i >= 0; i-- {
		switch body[i] {
		case ' ', '\t', '\n', '\r':
		case open:
			return true
		default:
			return false
		}
	}
	return false
}

func splice(body []byte, from, to int, insert string) []byte {
	out := make([]byte, 0, len(body)-(to-from)+len(insert))
	out = append(out, body[:from]...)
	out = append(out, insert...)
	return append(out, body[to:]...)
}

// unquote decodes a JSON string literal, allocating only when it has escapes.
func unquote(lit []byte) (string, bool) {
	inner := lit[1 : len(lit)-1]
	if !slices.Contains(inner, '\\') {
		return string(inner), true
	}
	return unquoteEscaped(lit)
}

func unquoteEscaped(lit []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", false
	}
	return s, true
}
