// Package databricks is the upstream adapter for Databricks Model Serving
// (provider type Databricks), through its OpenAI-compatible API: the
// client's body goes out as it is to {baseURL}/chat/completions (or
// /completions), baseURL being the workspace's
// https://<workspace>/serving-endpoints, and the body's model member (the
// provider model's servedName) naming the serving endpoint. That is the
// path Databricks documents for the OpenAI clients (base_url
// https://<workspace>/serving-endpoints, model the endpoint's name), and
// it answers in OpenAI's shape, streams included; the per-endpoint REST
// path, /serving-endpoints/{name}/invocations, takes the same body but is
// Databricks' own API (its answer's shape depends on the endpoint's task),
// so it is not used.
//
// Authentication is one of:
//   - a personal access token (the provider's credentials, read by the
//     gateway as any key), sent as a bearer token;
//   - OAuth machine-to-machine (spec.databricks.oauth): the service
//     principal's client id and secret (Target.ClientSecret, read by the
//     gateway from the Secret the settings name) are exchanged at
//     https://<workspace>/oidc/v1/token (grant_type client_credentials,
//     scope all-apis, HTTP basic auth) for an access token, which is
//     cached until RefreshBefore before it expires (package clientcred,
//     which the Azure adapter's Entra ID tokens share) and sent as a
//     bearer token. A 401 from the serving endpoint drops the cached token and
//     the request is sent once more with a new one. A rotated secret
//     (the gateway reads it on every request) gets a new token.
//
// Databricks' errors ({"error_code": "...", "message": "..."}) come back
// in OpenAI's shape, the error code as code; an error already in OpenAI's
// shape (an external model endpoint's) passes with a type filled in if it
// lacks one. Tokens and secrets are never logged nor put in an error.
package databricks

import (
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
	// TokenPath is the workspace's OAuth token endpoint.
	TokenPath = "/oidc/v1/token"
	// Scope is the scope asked for.
	Scope = "all-apis"
	// RefreshBefore is how long before it expires a token is replaced.
	RefreshBefore = clientcred.RefreshBefore
	// maxErrorBytes bounds an error body read.
	maxErrorBytes = 64 << 10
	// maxMessageLen bounds a provider's error message passed on.
	maxMessageLen = 4096
)

// Adapter speaks Databricks Model Serving over a shared transport.
type Adapter struct {
	rt     http.RoundTripper
	now    func() time.Time
	tokens *clientcred.Cache // by workspace and client
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

// RoundTrip sends one attempt, and with OAuth once more after a 401.
func (a *Adapter) RoundTrip(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	var op string
	switch r.Path {
	case "/v1/chat/completions":
		op = "/chat/completions"
	case "/v1/completions":
		op = "/completions"
	default:
		return upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusNotFound, Type: openaiapi.ErrTypeNotFound,
			Message: fmt.Sprintf("%s is not served by this model's provider (Databricks Model Serving)", r.Path), Code: "unsupported_endpoint"}), nil
	}
	u := strings.TrimSuffix(t.BaseURL, "/") + op
	oauth := t.Settings.DatabricksOAuthClientID != ""
	bearer, secrets := t.APIKey, []string{t.APIKey}
	if oauth {
		var refused *http.Response
		var err error
		bearer, refused, err = a.token(ctx, t, "")
		if err != nil || refused != nil {
			return refused, err
		}
		secrets = []string{t.ClientSecret, bearer}
	}
	resp, err := a.send(ctx, u, bearer, r)
	if err != nil {
		return nil, err
	}
	if oauth && resp.StatusCode == http.StatusUnauthorized {
		// The token may have been revoked or the secret rotated: once more
		// with a new one.
		resp.Body.Close()
		var refused *http.Response
		bearer, refused, err = a.token(ctx, t, bearer)
		if err != nil || refused != nil {
			return refused, err
		}
		secrets = append(secrets, bearer)
		if resp, err = a.send(ctx, u, bearer, r); err != nil {
			return nil, err
		}
	}
	if resp.StatusCode/100 != 2 {
		return translateError(resp, secrets), nil
	}
	return resp, nil
}

func (a *Adapter) send(ctx context.Context, u, bearer string, r upstream.Request) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return a.rt.RoundTrip(req)
}

// TokenURL is the token endpoint of the workspace a base URL is on.
func TokenURL(baseURL string) (string, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("databricks: base URL %q has no workspace host", baseURL)
	}
	return u.Scheme + "://" + u.Host + TokenPath, nil
}

// token returns a valid access token for the target (see clientcred.Cache.Token
// for when it is a new one). A refusal by the token endpoint is returned as
// the client's answer; a failure to reach it as an error.
func (a *Adapter) token(ctx context.Context, t upstream.Target, stale string) (string, *http.Response, error) {
	tu, err := TokenURL(t.BaseURL)
	if err != nil {
		return "", nil, err
	}
	tok, err := a.tokens.Token(ctx, clientcred.Client{TokenURL: tu, ID: t.Settings.DatabricksOAuthClientID, Secret: t.ClientSecret,
		Scope: Scope, BasicAuth: true}, stale)
	var refused *clientcred.Refused
	if errors.As(err, &refused) {
		// The endpoint's description is not passed on: it can name the client.
		return "", upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusUnauthorized, Type: openaiapi.ErrTypeAuthentication, Code: "provider_credentials",
			Message: fmt.Sprintf("Databricks refused the provider's OAuth client credentials (token endpoint: %d %s)", refused.Status, refused.Code)}), nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("databricks: provider %s: %w", t.Provider, err)
	}
	return tok, nil, nil
}

// translateError turns Databricks' error answer into OpenAI's shape.
func translateError(resp *http.Response, secrets []string) *http.Response {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var in struct {
		ErrorCode string          `json:"error_code"`
		Message   string          `json:"message"`
		Error     json.RawMessage `json:"error"`
	}
	var out openaiapi.APIError
	out.Status = resp.StatusCode
	out.Type = openaiapi.ErrTypeForStatus(resp.StatusCode)
	if json.Unmarshal(raw, &in) == nil {
		var oe struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   string          `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		switch {
		case len(in.Error) > 0 && json.Unmarshal(in.Error, &oe) == nil && oe.Message != "":
			out.Message, out.Param, out.Code = oe.Message, oe.Param, upstream.ErrorCode(oe.Code)
			if oe.Type != "" {
				out.Type = oe.Type
			}
		case len(in.Error) > 0:
			var s string
			if json.Unmarshal(in.Error, &s) == nil {
				out.Message = s
			}
			out.Code = in.ErrorCode
		default:
			out.Message, out.Code = in.Message, in.ErrorCode
		}
	}
	if out.Message == "" {
		out.Message = fmt.Sprintf("Databricks Model Serving answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	for _, s := range secrets {
		if s != "" {
			out.Message = strings.ReplaceAll(out.Message, s, "[redacted]")
		}
	}
	if len(out.Message) > maxMessageLen {
		out.Message = out.Message[:maxMessageLen]
	}
	b, _ := json.Marshal(out.Body())
	return upstream.WithJSONBody(resp, b)
}
