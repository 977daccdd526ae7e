// Package clientcred gets and caches OAuth 2.0 access tokens with the
// client-credentials grant (RFC 6749 section 4.4), for the upstream
// adapters whose providers authenticate the gateway as an application
// rather than with a static key: Databricks' service principals
// (machine-to-machine OAuth) and Microsoft Entra ID applications in front
// of Azure OpenAI.
//
// The grant is one form-encoded POST to the token endpoint
// (grant_type=client_credentials and the scope; the client's id and
// secret either in HTTP basic auth, as Databricks documents, or as the
// form fields client_id and client_secret, as Entra ID documents), and its
// answer is {"access_token": ..., "token_type": "Bearer", "expires_in":
// seconds}. There is no refresh token in this grant: a new token is got
// the same way.
//
// Why a cache: a token lives for about an hour, and asking for one per
// request would add a round trip to every request and, under load, be
// throttled by the identity provider. A Cache keeps one token per token
// endpoint, client id and scope until RefreshBefore before it expires (at
// half its life for a token shorter than twice that), so a request never
// leaves with a token about to expire in flight. Concurrent callers of
// one client share one fetch: the first asks, the others wait for its
// answer, so a burst after expiry costs one request to the identity
// provider, not one per request. A rotated secret (the gateway reads it
// on every request) is noticed by its digest and gets a new token; a
// token the provider refused (a 401, so revoked or the secret rotated)
// can be named stale and is replaced.
//
// Errors are of two kinds, which the adapters map as they do any
// provider's answers: *Refused, the token endpoint's 4xx answer (the
// credentials are wrong), which an adapter turns into a 401
// authentication_error for the client, since trying another target with
// the same credentials does not help the provider being asked; and any
// other error (the endpoint unreachable, a 5xx, an answer without a
// token), a transport error the gateway may retry elsewhere. Neither ever
// contains the secret or a token, and the endpoint's error_description is
// not kept, since it may quote what the client sent.
package clientcred

import (
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
)

const (
	// RefreshBefore is how long before it expires a token is replaced.
	RefreshBefore = time.Minute
	// maxBodyBytes bounds a token endpoint's answer read.
	maxBodyBytes = 64 << 10
)

// Client is one OAuth client of one token endpoint.
type Client struct {
	// TokenURL is the token endpoint.
	TokenURL string
	// ID and Secret are the client's credentials. The secret is never put
	// in an error.
	ID, Secret string
	// Scope is the scope asked for; empty: none sent.
	Scope string
	// BasicAuth sends ID and Secret in HTTP basic auth; false, as the form
	// fields client_id and client_secret.
	BasicAuth bool
}

// Refused is the token endpoint's refusal of the client's credentials.
type Refused struct {
	// Status is the endpoint's HTTP status.
	Status int
	// Code is the OAuth error code (invalid_client, unauthorized_client,
	// invalid_scope, ...), or the status when the answer had none.
	Code string
	// Codes are the identity provider's own error numbers when it gives
	// them (Entra ID's error_codes: 7000215 is a wrong secret, 7000222 an
	// expired one); they name no credential.
	Codes []int64
}

func (e *Refused) Error() string {
	return fmt.Sprintf("the token endpoint refused the client credentials: %d %s", e.Status, e.Code)
}

// Cache holds the tokens of any number of clients.
type Cache struct {
	rt  http.RoundTripper
	now func() time.Time

	mu     sync.Mutex
	tokens map[string]*entry // by token URL, client id and scope
}

type entry struct {
	mu      sync.Mutex // one fetch at a time: the others wait and take its token
	secret  [32]byte   // the digest of the secret the token was got with
	token   string
	expires time.Time // when it is replaced, RefreshBefore before it expires
}

// New is a cache asking over rt, its clock now (time.Now when nil).
func New(rt http.RoundTripper, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{rt: rt, now: now, tokens: map[string]*entry{}}
}

// Token returns a valid access token for the client: the cached one, or a
// new one when none is cached, it is about to expire, it was got with
// another secret, or it is stale (the one a 401 refused; "" for none).
func (c *Cache) Token(ctx context.Context, cl Client, stale string) (string, error) {
	if cl.Secret == "" {
		return "", fmt.Errorf("no OAuth client secret")
	}
	sum := sha256.Sum256([]byte(cl.Secret))
	key := cl.TokenURL + "\x00" + cl.ID + "\x00" + cl.Scope
	c.mu.Lock()
	e := c.tokens[key]
	if e == nil {
		e = &entry{}
		c.tokens[key] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.secret != sum {
		// A rotated secret: the token got with the old one is not used.
		e.secret, e.token = sum, ""
	}
	if e.token != "" && e.token != stale && c.now().Before(e.expires) {
		return e.token, nil
	}
	tok, ttl, err := c.fetch(ctx, cl)
	if err != nil {
		e.token = ""
		return "", err
	}
	margin := RefreshBefore
	if ttl < 2*margin {
		margin = ttl / 2
	}
	e.token, e.expires = tok, c.now().Add(ttl-margin)
	return tok, nil
}

// fetch asks the token endpoint for a token.
func (c *Cache) fetch(ctx context.Context, cl Client) (string, time.Duration, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if cl.Scope != "" {
		form.Set("scope", cl.Scope)
	}
	if !cl.BasicAuth {
		form.Set("client_id", cl.ID)
		form.Set("client_secret", cl.Secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cl.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		// The URL is the only input that can fail here, and holds no secret.
		return "", 0, fmt.Errorf("token request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cl.BasicAuth {
		req.SetBasicAuth(cl.ID, cl.Secret)
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		// net/http's errors name the method and URL, not the body.
		return "", 0, fmt.Errorf("token endpoint: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	var body struct {
		AccessToken string      `json:"access_token"`
		TokenType   string      `json:"token_type"`
		ExpiresIn   json.Number `json:"expires_in"`
		Error       string      `json:"error"`
		ErrorCodes  []int64     `json:"error_codes"`
	}
	_ = json.Unmarshal(raw, &body)
	if resp.StatusCode >= 500 {
		return "", 0, fmt.Errorf("token endpoint answered %d", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		code := body.Error
		if code == "" || len(code) > 64 || strings.ContainsAny(code, " \n") {
			code = strconv.Itoa(resp.StatusCode)
		}
		return "", 0, &Refused{Status: resp.StatusCode, Code: code, Codes: body.ErrorCodes}
	}
	// expires_in is a number in RFC 6749; json.Number takes one sent as
	// a string too, as some endpoints do.
	secs, err := body.ExpiresIn.Float64()
	if body.AccessToken == "" || err != nil || secs <= 0 {
		return "", 0, fmt.Errorf("the token endpoint's answer has no access_token or expires_in")
	}
	if body.TokenType != "" && !strings.EqualFold(body.TokenType, "bearer") {
		return "", 0, fmt.Errorf("the token endpoint gave a token of type %q, not Bearer", body.TokenType)
	}
	return body.AccessToken, time.Duration(secs * float64(time.Second)), nil
}
