// Package upstream is how the gateway talks to what serves a request: a
// vLLM worker, or an external provider of some type (OpenAI-compatible,
// Anthropic, Amazon Bedrock, Azure OpenAI, Databricks).
//
// An Adapter has one method, RoundTrip: it sends one attempt of the
// client's request to a target and returns the response in the client's
// API. An adapter for a provider that speaks another API translates the
// request on the way out and the response (body or event stream) on the
// way back, so everything the gateway does with a response — relaying it
// chunk by chunk, timing the first token, reading the usage — is written
// once, for the client's API.
//
// Adapters are registered by provider type (InferenceProvider.spec.type)
// in Types; the router's target names the type, so the gateway never
// guesses, and policyd and `yardctl validate` refuse a provider whose type
// has no adapter. Adding a provider type is one package implementing
// Adapter plus one Register line in package builtin.
//
// An adapter answering for itself (a request the provider cannot take)
// uses ErrorResponse; one translating a provider's error body uses
// WithJSONBody and ErrorCode (response.go).
//
// Native client APIs. The gateway serves clients of other APIs than
// OpenAI's (Anthropic's Messages API) by translating their requests into
// chat completions, which every adapter takes. An adapter whose provider
// speaks such an API itself implements Native: for an attempt of a request
// in that API, the gateway sends the client's own body (with the served
// model name) under the API's path instead, and passes the answer — body,
// event stream or error, which must be in that API — back as it is, so
// nothing the translation cannot carry (Anthropic's cache_control) is lost.
// Each attempt chooses on its own, so a request may fail over between a
// provider taking it natively and one taking the translation.
//
// Per-type settings. A provider type that needs settings of its own (a
// Bedrock provider's AWS region) has a member named after it in
// InferenceProvider.spec (spec.bedrock), which policyd's validation
// requires for that type and refuses on every other. The settings flow
// spec.bedrock → policy.Provider.Settings (compiled) → the snapshot's
// Provider.bedrock (proto) → the gateway's catalog → Target.Settings, one
// flat struct of typed fields that the next types extend with their own
// (zero for the types that do not read them). The router's target carries
// only the type and URL; the gateway fills in the settings from its copy
// of the snapshot, as it does the key.
//
// Credentials. By default the gateway reads the provider's API key and
// passes it in Target.APIKey. An adapter that authenticates otherwise
// (Bedrock signs each request with an AWS key pair) implements
// OwnCredentials: the gateway then reads no key and passes where the
// credentials are in Target.Credentials (a directory of key files, or
// nothing for the adapter's default chain); the adapter reads and caches
// them itself. A Databricks provider with spec.databricks.oauth, and an
// AzureOpenAI provider with spec.azure.entra, gets its OAuth client secret
// in Target.ClientSecret instead of a key (read from the Secret the
// settings name), which the adapter exchanges for access tokens with the
// client-credentials grant (package clientcred, which both share).
package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/switchyard-dev/switchyard/internal/registry"
)

// TypeWorker is the type of local workers (vLLM's OpenAI server).
const TypeWorker = "vLLM"

// Target is where one attempt goes.
type Target struct {
	// Type is the upstream's type: TypeWorker or a provider type.
	Type string
	// BaseURL is the worker's URL (http://host:port) or the provider's API
	// base, which ends in its API version (https://api.openai.com/v1).
	BaseURL string
	// APIKey is the provider's key; empty for workers and for adapters
	// that implement OwnCredentials. Adapters never log it or put it in an
	// error.
	APIKey string
	// Provider is the provider's namespace/name; empty for workers. An
	// adapter may key per-provider state (cached credentials) by it.
	Provider string
	// Settings are the provider's per-type settings.
	Settings Settings
	// ClientSecret is the OAuth client secret of a provider that
	// authenticates as an OAuth client (a Databricks provider with
	// spec.databricks.oauth, an AzureOpenAI provider with
	// spec.azure.entra; APIKey is then empty), read by the gateway as
	// it reads API keys. Adapters never log it or put it in an error.
	ClientSecret string
	// Credentials says where an OwnCredentials adapter finds its
	// credentials; empty for the others.
	Credentials CredentialsRef
}

// Settings are the settings of the provider types that have any, one
// typed field (or group) per type, zero for the types that do not read it.
type Settings struct {
	// Region is a Bedrock provider's AWS region (spec.bedrock.region),
	// which requests are signed for.
	Region string
	// AzureAPIVersion is an AzureOpenAI provider's api-version query
	// parameter (spec.azure.apiVersion).
	AzureAPIVersion string
	// DatabricksOAuthClientID is a Databricks provider's OAuth client id
	// (spec.databricks.oauth.clientID); set, the adapter exchanges
	// Target.ClientSecret for access tokens instead of sending APIKey.
	DatabricksOAuthClientID string
	// AzureEntra is an AzureOpenAI provider's Microsoft Entra ID
	// application (spec.azure.entra); set (a client id), the adapter
	// exchanges Target.ClientSecret for access tokens instead of sending
	// APIKey.
	AzureEntra AzureEntra
}

// AzureEntra is a Microsoft Entra ID application's tenant, client id and
// authority host (https://login.microsoftonline.com, no trailing slash);
// zero for a provider without one.
type AzureEntra struct {
	TenantID, ClientID, AuthorityHost string
}

// CredentialsRef says where an OwnCredentials adapter reads its
// credentials.
type CredentialsRef struct {
	// Dir is a directory of credential files, one value a file, named by
	// the adapter (a mounted Kubernetes Secret: the provider's secretRef
	// under the gateway's --provider-secrets-dir; or the provider's
	// credentials.file). Empty: the adapter's default chain.
	Dir string
}

// OwnCredentials is implemented by an adapter that reads its provider's
// credentials itself, from Target.Credentials, rather than getting an API
// key in Target.APIKey.
type OwnCredentials interface {
	Adapter
	// OwnCredentials marks the adapter; it does nothing.
	OwnCredentials()
}

// Native is implemented by an adapter that takes requests of a client API
// other than OpenAI's as they are (see the package doc).
type Native interface {
	Adapter
	// Native reports whether RoundTrip takes a request whose Path is that
	// API's (/v1/messages) with the client's body, and answers in that API
	// as the provider does.
	Native(path string) bool
}

// Request is the client's request, as the gateway forwards it.
type Request struct {
	// Path is the client's API path, e.g. /v1/chat/completions, or a
	// native API's (Native).
	Path string
	// Body is the client's body with the gateway's splices applied (the
	// served model name, stream_options.include_usage; a native API's body
	// only the first).
	Body []byte
	// Header holds the client headers the gateway passes on (Accept,
	// trace context) and its own (the request id).
	Header http.Header
}

// Adapter speaks one upstream API.
type Adapter interface {
	// RoundTrip sends one attempt. A transport error (nothing came back)
	// is returned as an error, and the gateway may retry elsewhere; any
	// HTTP answer, error statuses included, is a response in the client's
	// API.
	RoundTrip(ctx context.Context, t Target, r Request) (*http.Response, error)
}

// Factory builds a type's adapter over the gateway's shared transport.
type Factory func(rt http.RoundTripper) Adapter

// Types is every upstream type an adapter exists for.
var Types = registry.New[Factory]("provider type")

// ErrNoAdapter is returned for a target whose type has no adapter.
var ErrNoAdapter = errors.New("no adapter for this upstream type")

// Set is the adapters of every registered type, built once over one
// transport.
type Set struct {
	byType map[string]Adapter
}

// NewSet builds an adapter for every registered type.
func NewSet(rt http.RoundTripper) *Set {
	s := &Set{byType: map[string]Adapter{}}
	for _, name := range Types.Names() {
		f, _ := Types.Lookup(name)
		s.byType[name] = f(rt)
	}
	return s
}

// For returns the adapter of a type.
func (s *Set) For(typ string) (Adapter, error) {
	if a, ok := s.byType[typ]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNoAdapter, typ)
}
