// Package azure is the upstream adapter for Azure OpenAI Service (provider
// type AzureOpenAI). Azure speaks OpenAI's API on a deployment's path: the
// client's body goes out as it is (its model member, already the
// provider's served name, stays) to
//
//	POST {baseURL}/openai/deployments/{deployment}/chat/completions?api-version={apiVersion}
//
// (or /completions), where deployment is the body's model (the provider
// model's servedName) and apiVersion is spec.azure.apiVersion. baseURL is
// the resource's endpoint, https://<resource>.openai.azure.com.
//
// Authentication is one of (the client's Authorization never leaves):
//   - the resource's API key (the provider's credentials, read by the
//     gateway as any key), in the api-key header;
//   - a Microsoft Entra ID application (spec.azure.entra): its client id
//     and secret (Target.ClientSecret, read by the gateway from the Secret
//     the settings name) are exchanged at
//     {authorityHost}/{tenantID}/oauth2/v2.0/token (the client-credentials
//     grant, the id and secret as form fields, scope
//     https://cognitiveservices.azure.com/.default, Azure AI services'
//     audience) for an access token, cached until shortly before it
//     expires by package clientcred (as Databricks' OAuth tokens are; one
//     fetch however many requests wait for it) and sent as Authorization:
//     Bearer. A 401 from the resource drops the cached token and the
//     request is sent once more with a new one. Entra ID's refusal (a
//     wrong or expired secret, an unknown client or tenant) is a 401
//     authentication_error naming its error code and AADSTS numbers, never
//     its description (which names the application); an unreachable
//     token endpoint is a transport error, which the gateway may retry
//     elsewhere.
//
// Answers are OpenAI's, with Azure's additions, which OpenAI clients
// ignore (content_filter_results, prompt_filter_results), and
// finish_reason content_filter, which is OpenAI's too. Two things are
// mapped:
//   - a stream's chunks that carry only prompt_filter_results (no choices,
//     no usage; Azure sends one before the first token) are dropped, so the
//     first chunk the gateway times and the client reads is a token, as
//     from OpenAI;
//   - Azure's error envelope has no type, and a code that may be a number
//     or a status ("401", "429", "DeploymentNotFound", "content_filter"):
//     errors come back in OpenAI's shape with a type from the status, the
//     code as a string, param, and Azure's innererror (the content filter's
//     verdict) kept; a body that is not JSON becomes a message naming the
//     status. Headers (Retry-After, x-ratelimit-*, apim-request-id) pass on.
//
// A static Entra ID token as the credential is refused before anything is
// sent (it would expire within hours; spec.azure.entra gets new ones), and
// managed identities are not supported. The key, secret and tokens are
// never logged, and a message quoting one has it cut out.
package azure

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/clientcred"
)

const (
	// maxErrorBytes bounds an error body read to translate it.
	maxErrorBytes = 64 << 10
	// maxLineBytes bounds one line of a stream.
	maxLineBytes = 4 << 20
	// maxMessageLen bounds a provider's error message passed on.
	maxMessageLen = 4096
)

// ErrEntraToken is returned for a provider whose credential is a
// Microsoft Entra ID token rather than an API key.
var ErrEntraToken = errors.New("the credential is a Microsoft Entra ID token (a JWT), not the resource's API key: a token expires within hours; set spec.azure.entra for the gateway to get tokens as an Entra ID application")

const (
	// EntraScope is the scope Entra ID tokens are asked for: Azure AI
	// services' (Cognitive Services') audience, which Azure OpenAI takes.
	EntraScope = "https://cognitiveservices.azure.com/.default"
	// DefaultAuthorityHost is Entra ID's global cloud, for settings that
	// name none.
	DefaultAuthorityHost = "https://login.microsoftonline.com"
)

// Adapter speaks Azure OpenAI over a shared transport.
type Adapter struct {
	rt     http.RoundTripper
	now    func() time.Time  // the token cache's clock, replaced in tests
	tokens *clientcred.Cache // Entra ID tokens, by tenant and client
}

var (
	_ upstream.Adapter = (*Adapter)(nil)
	_ upstream.Factory = New
)

// New is the adapter's upstream.Factory.
func New(rt http.RoundTripper) upstream.Adapter {
	a := &Adapter{rt: rt, now: time.Now}
	a.tokens = clientcred.New(rt, func() time.Time { return a.now() })
	return a
}

// TokenURL is the Entra ID token endpoint of an application's settings.
func TokenURL(e upstream.AzureEntra) string {
	host := strings.TrimRight(e.AuthorityHost, "/")
	if host == "" {
		host = DefaultAuthorityHost
	}
	return host + "/" + url.PathEscape(e.TenantID) + "/oauth2/v2.0/token"
}

// RoundTrip sends one attempt to the deployment the body names, and with
// Entra ID once more after a 401.
func (a *Adapter) RoundTrip(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	var op string
	switch r.Path {
	case "/v1/chat/completions":
		op = "/chat/completions"
	case "/v1/completions":
		op = "/completions"
	default:
		return upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusNotFound, Type: openaiapi.ErrTypeNotFound,
			Message: fmt.Sprintf("%s is not served by this model's provider (Azure OpenAI)", r.Path), Code: "unsupported_endpoint"}), nil
	}
	if t.Settings.AzureAPIVersion == "" {
		return nil, fmt.Errorf("azure openai: provider %s has no api-version (spec.azure.apiVersion)", t.Provider)
	}
	entra := t.Settings.AzureEntra.ClientID != ""
	if !entra && IsEntraToken(t.APIKey) {
		return nil, fmt.Errorf("azure openai: provider %s: %w", t.Provider, ErrEntraToken)
	}
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return upstream.ErrorResponse(openaiapi.InvalidRequest("", "the body is not a JSON object: "+err.Error())), nil
	}
	if body.Model == "" {
		return upstream.ErrorResponse(openaiapi.InvalidRequest("model", "model is required: it names the Azure OpenAI deployment")), nil
	}
	u := strings.TrimSuffix(t.BaseURL, "/") + "/openai/deployments/" + url.PathEscape(body.Model) + op +
		"?api-version=" + url.QueryEscape(t.Settings.AzureAPIVersion)
	var bearer string
	secrets := []string{t.APIKey}
	if entra {
		var refused *http.Response
		var err error
		if bearer, refused, err = a.token(ctx, t, ""); err != nil || refused != nil {
			return refused, err
		}
		secrets = []string{t.ClientSecret, bearer}
	}
	resp, err := a.send(ctx, u, t.APIKey, bearer, r)
	if err != nil {
		return nil, err
	}
	if entra && resp.StatusCode == http.StatusUnauthorized {
		// The token may have been revoked, or the application's role
		// changed: once more with a new one.
		resp.Body.Close()
		var refused *http.Response
		if bearer, refused, err = a.token(ctx, t, bearer); err != nil || refused != nil {
			return refused, err
		}
		secrets = append(secrets, bearer)
		if resp, err = a.send(ctx, u, t.APIKey, bearer, r); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode/100 != 2 {
		return translateError(resp, secrets), nil
	}
	if body.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = newFilter(resp.Body)
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return resp, nil
}

// send posts the body with the key (api-key) or a bearer token.
func (a *Adapter) send(ctx context.Context, u, key, bearer string, r upstream.Request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	req.Header.Del("Authorization")
	req.Header.Set("Content-Type", "application/json")
	switch {
	case bearer != "":
		req.Header.Set("Authorization", "Bearer "+bearer)
	case key != "":
		req.Header.Set("Api-Key", key)
	}
	return a.rt.RoundTrip(req)
}

// token returns an Entra ID access token for the target's application
// (see clientcred.Cache.Token for when it is a new one; stale is the one
// a 401 refused). Entra ID's refusal is returned as the client's answer,
// a failure to reach it as an error.
func (a *Adapter) token(ctx context.Context, t upstream.Target, stale string) (string, *http.Response, error) {
	e := t.Settings.AzureEntra
	tok, err := a.tokens.Token(ctx, clientcred.Client{TokenURL: TokenURL(e), ID: e.ClientID, Secret: t.ClientSecret, Scope: EntraScope}, stale)
	var refused *clientcred.Refused
	if errors.As(err, &refused) {
		// error_description is not passed on: it names the application;
		// the AADSTS numbers say what is wrong (7000215 a wrong secret,
		// 7000222 an expired one, 700016 an unknown application).
		msg := fmt.Sprintf("Microsoft Entra ID refused the provider's client credentials (token endpoint: %d %s", refused.Status, refused.Code)
		for i, c := range refused.Codes {
			if i == 4 {
				break
			}
			msg += fmt.Sprintf(", AADSTS%d", c)
		}
		return "", upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusUnauthorized, Type: openaiapi.ErrTypeAuthentication,
			Code: "provider_credentials", Message: msg + ")"}), nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("azure openai: provider %s: Entra ID token: %w", t.Provider, err)
	}
	return tok, nil, nil
}

// IsEntraToken says whether a credential looks like a Microsoft Entra ID
// access token (a JWT, or one with its Bearer prefix) rather than an Azure
// OpenAI API key (32 hexadecimal or 84 alphanumeric characters).
func IsEntraToken(key string) bool {
	k := strings.TrimSpace(key)
	if len(k) > 7 && strings.EqualFold(k[:7], "bearer ") {
		return true
	}
	return strings.HasPrefix(k, "eyJ") && strings.Count(k, ".") == 2
}

// azureError is Azure's error envelope.
type azureError struct {
	Error *struct {
		Message    string          `json:"message"`
		Type       *string         `json:"type"`
		Param      *string         `json:"param"`
		Code       json.RawMessage `json:"code"`
		InnerError json.RawMessage `json:"innererror,omitempty"`
	} `json:"error"`
}

// openAIError is OpenAI's error body, with Azure's innererror kept.
type openAIError struct {
	Error struct {
		Message    string          `json:"message"`
		Type       string          `json:"type"`
		Param      *string         `json:"param"`
		Code       *string         `json:"code"`
		InnerError json.RawMessage `json:"innererror,omitempty"`
	} `json:"error"`
}

// translateError turns Azure's error answer into OpenAI's shape.
func translateError(resp *http.Response, secrets []string) *http.Response {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var out openAIError
	out.Error.Type = openaiapi.ErrTypeForStatus(resp.StatusCode)
	var in azureError
	if err := json.Unmarshal(raw, &in); err == nil && in.Error != nil {
		e := in.Error
		out.Error.Message = e.Message
		if e.Type != nil && *e.Type != "" {
			out.Error.Type = *e.Type
		}
		out.Error.Param = e.Param
		if c := upstream.ErrorCode(e.Code); c != "" {
			out.Error.Code = &c
		}
		if len(e.InnerError) > 0 && string(e.InnerError) != "null" {
			out.Error.InnerError = e.InnerError
		}
	}
	if out.Error.Message == "" {
		out.Error.Message = fmt.Sprintf("Azure OpenAI answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	for _, s := range secrets {
		if s != "" {
			out.Error.Message = strings.ReplaceAll(out.Error.Message, s, "[redacted]")
		}
	}
	if len(out.Error.Message) > maxMessageLen {
		out.Error.Message = out.Error.Message[:maxMessageLen]
	}
	b, _ := json.Marshal(out)
	return upstream.WithJSONBody(resp, b)
}

// filter passes a stream on event by event, dropping the events that carry
// only Azure's prompt_filter_results.
type filter struct {
	src io.ReadCloser
	r   *bufio.Reader
	buf bytes.Buffer // the event being read
	out []byte       // what is ready to be read
	err error
}

func newFilter(src io.ReadCloser) io.ReadCloser {
	return &filter{src: src, r: bufio.NewReaderSize(src, 64<<10)}
}

func (f *filter) Read(p []byte) (int, error) {
	for len(f.out) == 0 && f.err == nil {
		line, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: pass what is read on, it is no filter-only event.
			f.buf.Write(line)
			if f.buf.Len() > maxLineBytes {
				f.err = fmt.Errorf("azure openai: a stream line longer than %d bytes", maxLineBytes)
			}
			continue
		}
		f.buf.Write(line)
		if err != nil {
			f.out, f.err = append(f.out, f.buf.Bytes()...), err
			f.buf.Reset()
			break
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 { // the event's end
			if !filterOnly(f.buf.Bytes()) {
				f.out = append(f.out, f.buf.Bytes()...)
			}
			f.buf.Reset()
		}
	}
	n := copy(p, f.out)
	f.out = f.out[n:]
	if len(f.out) == 0 && n > 0 {
		f.out = nil
		return n, nil
	}
	if n > 0 {
		return n, nil
	}
	return 0, f.err
}

func (f *filter) Close() error { return f.src.Close() }

// filterOnly says whether an event is a chunk with no choices and no
// usage, which Azure sends with prompt_filter_results.
func filterOnly(ev []byte) bool {
	if !bytes.Contains(ev, []byte(`"prompt_filter_results"`)) {
		return false
	}
	for _, line := range bytes.Split(ev, []byte("\n")) {
		d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue
		}
		var c struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   json.RawMessage   `json:"usage"`
		}
		if json.Unmarshal(bytes.TrimSpace(d), &c) != nil {
			return false
		}
		return len(c.Choices) == 0 && (len(c.Usage) == 0 || string(c.Usage) == "null")
	}
	return false
}
