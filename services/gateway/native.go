package gateway

import (
	"net/http"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/services/gateway/internal/apibody"
)

// nativeRequest is a request of an inbound API other than OpenAI's as its
// client sent it, handed to the chat path beside the chat body it
// translates to. The chat path routes the chat body, and sends it to every
// target but one whose adapter takes the inbound API natively
// (upstream.Native): that attempt sends the client's own body (the served
// model name set), and its answer, in the client's API already, goes back
// untranslated. The choice is each attempt's, in attempt, so a request may
// fail over between the two kinds of target.
type nativeRequest struct {
	api nativeAPI
	// body is the client's body.
	body []byte
	// header holds the client's headers the API passes on to a native
	// attempt (never a credential).
	header http.Header
	// passThrough tells the inbound API's ResponseWriter, before the
	// chat path writes an answer that came natively, not to translate it.
	passThrough func()
}

// nativeAPI is what the chat path needs of an inbound API to send its
// requests natively and meter the answers.
type nativeAPI interface {
	// path is the API's path, which adapters are asked about and get.
	path() string
	// forward is the client's body under the served model name.
	forward(body []byte, served string) []byte
	// meter reads one answer's usage.
	meter() usageMeter
}

// usageMeter reads the usage of an answer in a native API.
type usageMeter interface {
	// event reads one data payload of a stream: whether it ends the answer
	// and whether it carries output tokens.
	event(data []byte) (done, tokens bool)
	// failed reports whether the stream ended with the upstream's error
	// (an event of the API's own, passed on to the client).
	failed() bool
	// body reads a whole non-streamed answer.
	body(b []byte)
	// usage is what was read, in the gateway's terms.
	usage() (apibody.Usage, bool)
}

// nativeFor is the native request an attempt on adapter sends, or nil when
// the adapter takes only the chat path's body.
func (n *nativeRequest) nativeFor(adapter upstream.Adapter) *nativeRequest {
	if n == nil {
		return nil
	}
	if na, ok := adapter.(upstream.Native); ok && na.Native(n.api.path()) {
		return n
	}
	return nil
}
