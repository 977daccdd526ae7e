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
//     cached until RefreshBefore before it expires and sent as a bearer
//     token. A 401 from the serving endpoint drops the cached token and
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
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/upstream"
)

const (
	// TokenPath is the workspace's OAuth token endpoint.
	TokenPath = "/oidc/v1/token"
	// Scope is the scope asked for.
	Scope = "all-apis"
	// RefreshBefore is how long before it expires a token is replaced.
	RefreshBefore = time.Minute
	// maxErrorBytes bounds an error or token body read.
	maxErrorBytes = 64 << 10
	// maxMessageLen bounds a provider's error message passed on.
	maxMessageLen = 4096
)

// Adapter speaks Databricks Model Serving over a shared transport.
type Adapter struct {
	rt  http.RoundTripper
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]*tokenEntry // by token URL and client id
}

type tokenEntry struct {
	mu      sync.Mutex // one fetch at a time
	secret  [32]byte   // the digest of the secret the token was got with
	token   string
	expires time.Time
}

var (
	_ upstream.Adapter = (*Adapter)(nil)
	_ upstream.Factory = New
)

// New is the adapter's upstream.Factory.
func New(rt http.RoundTripper) upstream.Adapter {
	return &Adapter{rt: rt, now: time.Now, tokens: map[string]*tokenEntry{}}
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
		_, bearer, refused, err = a.token(ctx, t, "")
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
		_, bearer, refused, err = a.token(ctx, t, bearer)
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

// token returns a valid access token for the target, fetching one when
// none is cached, the cached one is about to expire, or it is stale (the
// one a 401 refused). A refusal by the token endpoint is returned as the
// client's answer; a failure to reach it as an error.
func (a *Adapter) token(ctx context.Context, t upstream.Target, stale string) (*tokenEntry, string, *http.Response, error) {
	if t.ClientSecret == "" {
		return nil, "", nil, fmt.Errorf("databricks: provider %s: no OAuth client secret", t.Provider)
	}
	tu, err := TokenURL(t.BaseURL)
	if err != nil {
		return nil, "", nil, err
	}
	sum := sha256.Sum256([]byte(t.ClientSecret))
	key := tu + "\x00" + t.Settings.DatabricksOAuthClientID
	a.mu.Lock()
	e := a.tokens[key]
	if e == nil {
		e = &tokenEntry{}
		a.tokens[key] = e
	}
	a.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.secret != sum {
		// A rotated secret: the token got with the old one is not used.
		e.secret, e.token = sum, ""
	}
	if e.token != "" && e.token != stale && a.now().Before(e.expires) {
		return e, e.token, nil, nil
	}
	tok, ttl, refused, err := a.fetch(ctx, tu, t)
	if err != nil || refused != nil {
		e.token = ""
		return e, "", refused, err
	}
	margin := RefreshBefore
	if ttl < 2*margin {
		margin = ttl / 2
	}
	e.token, e.expires = tok, a.now().Add(ttl-margin)
	return e, tok, nil, nil
}

// fetch gets a token from the workspace's token endpoint.
func (a *Adapter) fetch(ctx context.Context, tokenURL string, t upstream.Target) (string, time.Duration, *http.Response, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {Scope}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form))
	if err != nil {
		return "", 0, nil, fmt.Errorf("databricks: build token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(t.Settings.DatabricksOAuthClientID, t.ClientSecret)
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return "", 0, nil, fmt.Errorf("databricks: provider %s: token endpoint: %w", t.Provider, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var body struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.Number     `json:"expires_in"`
		Error       string          `json:"error"`
		Description json.RawMessage `json:"error_description"`
	}
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode >= 500 {
		return "", 0, nil, fmt.Errorf("databricks: provider %s: token endpoint answered %d", t.Provider, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		code := body.Error
		if code == "" {
			code = strconv.Itoa(resp.StatusCode)
		}
		// The description is not passed on: it can name the client.
		return "", 0, upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusUnauthorized, Type: openaiapi.ErrTypeAuthentication, Code: "provider_credentials",
			Message: fmt.Sprintf("Databricks refused the provider's OAuth client credentials (token endpoint: %d %s)", resp.StatusCode, code)}), nil
	}
	secs, err := body.ExpiresIn.Float64()
	if body.AccessToken == "" || err != nil || secs <= 0 {
		return "", 0, nil, fmt.Errorf("databricks: provider %s: the token endpoint's answer has no access_token or expires_in", t.Provider)
	}
	if body.TokenType != "" && !strings.EqualFold(body.TokenType, "bearer") {
		return "", 0, nil, fmt.Errorf("databricks: provider %s: the token endpoint gave a token of type %q, not Bearer", t.Provider, body.TokenType)
	}
	return body.AccessToken, time.Duration(secs * float64(time.Second)), nil, nil
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
