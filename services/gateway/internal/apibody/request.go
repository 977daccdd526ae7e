// Package apibody reads and edits OpenAI request and response bodies as
// little as the gateway needs: the fields routing depends on, the byte
// splices that give the upstream the served model name and ask it for
// usage, and the usage object of a response or stream chunk. Everything
// else in a body passes through untouched. Bodies are read with
// internal/jsonscan, whose key rule is vLLM's: the members read here are
// the ones the worker reads.
package apibody

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/switchyard-dev/switchyard/internal/jsonscan"
	"github.com/switchyard-dev/switchyard/internal/openaiapi"
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

// Request is what routing needs from a request body, and where in the body
// the members Forward edits are.
type Request struct {
	Model  string
	Stream bool
	// IncludeUsage is stream_options.include_usage as the client sent it.
	IncludeUsage bool
	// MaxTokens is the most output tokens the client asked for:
	// max_completion_tokens, else max_tokens, as vLLM reads them; 0 when
	// neither is a positive integer (the upstream judges invalid values).
	MaxTokens int64

	at spans
}

// spans locate, in the body Parse read, the members Forward edits: the
// ones that count by the key rule (the last of a repeated key).
type spans struct {
	model      jsonscan.Member
	opts       jsonscan.Member // stream_options; Kind Invalid when absent
	usage      jsonscan.Member // include_usage, offsets within opts.Value; Kind Invalid when absent
	closeBrace int             // of the top-level object
}

// Parse validates body as a request to api and extracts the routing fields.
// JSON is validated in full; fields other than model, stream,
// stream_options.include_usage and messages/prompt are not looked at. Keys
// follow jsonscan's rule, vLLM's: exact, and the last of a repeated key
// counts. Errors are client-facing 400s.
func Parse(api API, body []byte) (Request, *openaiapi.APIError) {
	var model, stream, streamOpts, input, maxTokens, maxCompletion jsonscan.Member
	var hasModel, hasStream, hasStreamOpts, hasInput bool
	inputKey := "messages"
	if api == Completions {
		inputKey = "prompt"
	}
	kind, closeBrace, err := jsonscan.Members(body, func(m jsonscan.Member) {
		switch {
		case m.KeyIs("model"):
			model, hasModel = m, true
		case m.KeyIs("stream"):
			stream, hasStream = m, true
		case m.KeyIs("stream_options"):
			streamOpts, hasStreamOpts = m, true
		case m.KeyIs(inputKey):
			input, hasInput = m, true
		case m.KeyIs("max_tokens"):
			maxTokens = m
		case m.KeyIs("max_completion_tokens"):
			maxCompletion = m
		}
	})
	if err != nil {
		if len(body) == 0 {
			return Request{}, openaiapi.InvalidRequest("", "request body is empty: expected a JSON object")
		}
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			return Request{}, openaiapi.InvalidRequest("", "could not parse the JSON body of the request: "+se.Error())
		}
		return Request{}, openaiapi.InvalidRequest("", "could not parse the JSON body of the request")
	}
	if kind != jsonscan.Object {
		return Request{}, openaiapi.InvalidRequest("", "the request body must be a JSON object, but got "+describe(kind)+" instead")
	}

	req := Request{at: spans{model: model, closeBrace: closeBrace}}
	if !hasModel || model.Kind == jsonscan.Null {
		return Request{}, openaiapi.InvalidRequest("model", "you must provide a model parameter")
	}
	if model.Kind != jsonscan.String {
		return Request{}, typeError("model", jsonscan.String, model.Kind)
	}
	name, ok := jsonscan.Unquote(model.Value)
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
	req.MaxTokens = positiveInt(maxCompletion)
	if req.MaxTokens == 0 {
		req.MaxTokens = positiveInt(maxTokens)
	}

	if hasStream {
		switch stream.Kind {
		case jsonscan.Bool:
			req.Stream = stream.Value[0] == 't'
		case jsonscan.Null:
		default:
			return Request{}, typeError("stream", jsonscan.Bool, stream.Kind)
		}
	}
	if hasStreamOpts {
		req.at.opts = streamOpts
		switch streamOpts.Kind {
		case jsonscan.Object:
			inc, found, _ := jsonscan.Last(streamOpts.Value, "include_usage")
			if found {
				req.at.usage = inc
				switch inc.Kind {
				case jsonscan.Bool:
					req.IncludeUsage = inc.Value[0] == 't'
				case jsonscan.Null:
				default:
					return Request{}, typeError("stream_options.include_usage", jsonscan.Bool, inc.Kind)
				}
			}
		case jsonscan.Null:
		default:
			return Request{}, typeError("stream_options", jsonscan.Object, streamOpts.Kind)
		}
	}

	if !hasInput || input.Kind == jsonscan.Null {
		return Request{}, openaiapi.InvalidRequest(inputKey, fmt.Sprintf("missing required parameter: '%s'", inputKey))
	}
	switch api {
	case Chat:
		if input.Kind != jsonscan.Array {
			return Request{}, typeError(inputKey, jsonscan.Array, input.Kind)
		}
		if isEmptyArray(input.Value) {
			return Request{}, openaiapi.InvalidRequest(inputKey, "'messages' must contain at least one message")
		}
	case Completions:
		// vLLM accepts a string, a list of strings, a list of token ids or a
		// list of lists of token ids; the element shapes are vLLM's to check.
		if input.Kind != jsonscan.String && input.Kind != jsonscan.Array {
			return Request{}, openaiapi.InvalidRequest(inputKey,
				"invalid type for 'prompt': expected a string or an array, but got "+describe(input.Kind)+" instead")
		}
	}
	return req, nil
}

func typeError(param string, want, got jsonscan.Kind) *openaiapi.APIError {
	return openaiapi.InvalidRequest(param, fmt.Sprintf("invalid type for '%s': expected %s, but got %s instead",
		param, describe(want), describe(got)))
}

// describe names a kind with its article, as in OpenAI's error messages.
func describe(k jsonscan.Kind) string {
	switch k {
	case jsonscan.Object, jsonscan.Array:
		return "an " + k.String()
	case jsonscan.Null:
		return "null"
	}
	return "a " + k.String()
}

func isEmptyArray(v []byte) bool {
	for _, c := range v[1 : len(v)-1] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// Forward returns the body to send to an upstream that serves the request
// under the name served (the router's Target.served_model): the client's
// body with model renamed when served differs from the requested name, and
// with stream_options.include_usage set when InjectsUsage. Only the bytes
// of those members change, in one copy, from the spans Parse found: the
// body is not scanned again. body must be the one Parse read; it is
// returned as it is when nothing changes.
func (r *Request) Forward(body []byte, served string) []byte {
	var edits [2]jsonscan.Edit
	n := 0
	if served != "" && served != r.Model {
		m := r.at.model
		edits[n] = jsonscan.Edit{From: m.Offset, To: m.End(), Text: jsonscan.AppendString(nil, served)}
		n++
	}
	if r.InjectsUsage() {
		edits[n] = r.includeUsage()
		n++
	}
	if n == 0 {
		return body
	}
	return jsonscan.Splice(body, edits[:n]...)
}

// InjectsUsage reports whether Forward asks the upstream for the usage of a
// stream whose client did not: the gateway meters every stream, and drops
// the usage chunk the client did not ask for.
func (r *Request) InjectsUsage() bool { return r.Stream && !r.IncludeUsage }

var (
	usageMember = []byte(`,"stream_options":{"include_usage":true}`)
	usageObject = []byte(`{"include_usage":true}`)
	usageFirst  = []byte(`"include_usage":true,`)
	usageOnly   = []byte(`"include_usage":true`)
	jsonTrue    = []byte(`true`)
)

// includeUsage is the edit that sets stream_options.include_usage: it
// replaces a null or false value, inserts the key into the stream_options
// object, or appends a stream_options member to the top-level object
// (after every other member, so no byte but the brace moves).
func (r *Request) includeUsage() jsonscan.Edit {
	opts := r.at.opts
	switch opts.Kind {
	case jsonscan.Null:
		return jsonscan.Edit{From: opts.Offset, To: opts.End(), Text: usageObject}
	case jsonscan.Object:
		if inc := r.at.usage; inc.Kind != jsonscan.Invalid {
			return jsonscan.Edit{From: opts.Offset + inc.Offset, To: opts.Offset + inc.End(), Text: jsonTrue}
		}
		ins := usageFirst
		if isEmptyArray(opts.Value) {
			ins = usageOnly
		}
		return jsonscan.Edit{From: opts.Offset + 1, To: opts.Offset + 1, Text: ins}
	}
	// Absent. Parse accepted the body, so the object has members.
	return jsonscan.Edit{From: r.at.closeBrace, To: r.at.closeBrace, Text: usageMember}
}

// positiveInt is m's value when it is a positive JSON integer (1e3 is
// not), else 0.
func positiveInt(m jsonscan.Member) int64 {
	if m.Kind != jsonscan.Number {
		return 0
	}
	n, err := strconv.ParseInt(string(m.Value), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
