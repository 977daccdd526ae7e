// Package bedrock is the upstream adapter for Amazon Bedrock's Converse
// API (provider type Bedrock). The client's OpenAI chat completions body
// is translated into a Converse request (messages of content blocks —
// text, images from data: URLs, toolUse and toolResult — the system
// prompt, inferenceConfig and toolConfig), posted to
// {baseURL}/model/{modelId}/converse, or /converse-stream for a stream,
// and signed with AWS Signature Version 4 (the AWS SDK's signer, service
// "bedrock", the provider's spec.bedrock.region). modelId is the model the
// body names, which the gateway has already replaced with the provider's
// served name. The answer comes back in OpenAI's API: a Converse response
// as a chat.completion; ConverseStream's binary event stream as
// chat.completion.chunk events, translated one event at a time as they
// arrive, a usage chunk from the metadata event when the body asks for
// usage, and data: [DONE]; Bedrock's exceptions as OpenAI's error with a
// matching status. An exception in the middle of a stream makes the body's
// Read fail (ErrStreamException), which the gateway reports as a broken
// stream. /v1/completions is refused with a 400.
//
// Credentials. The adapter reads its own (upstream.OwnCredentials):
//   - a provider without credentials uses the AWS SDK's default chain
//     (config.LoadDefaultConfig: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
//     and AWS_SESSION_TOKEN in the gateway's environment, a web identity
//     token file as EKS's IRSA mounts it, AWS_PROFILE and the shared
//     config and credentials files, the container and instance roles),
//     loaded once per region;
//   - a provider whose credentials name a Secret (secretRef, mounted under
//     the gateway's --provider-secrets-dir as <secret>/<key>) or a
//     directory (file) reads the key pair from the files accessKeyId,
//     secretAccessKey and, for temporary credentials, sessionToken in it.
//     They are read again a minute after they were last read, so a rotated
//     Secret takes effect without a restart.
//
// Credentials are cached (aws.CredentialsCache, which refreshes expiring
// ones as the SDK's clients do). They are never logged, and no error
// contains them: an error about them names the file or the chain, and a
// refusal of them by Bedrock is reported without Bedrock's message, which
// can name the principal.
package bedrock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
	"github.com/switchyard-dev/switchyard/internal/upstream"
)

// SigningService is the name Bedrock's runtime is signed for.
const SigningService = "bedrock"

// Names of the files a credentials directory (a mounted Secret) holds.
const (
	KeyAccessKeyID     = "accessKeyId"
	KeySecretAccessKey = "secretAccessKey"
	KeySessionToken    = "sessionToken"
)

const (
	// maxResponseBytes bounds a Converse response the adapter reads whole.
	maxResponseBytes = 32 << 20
	// maxErrorBytes bounds an error answer.
	maxErrorBytes = 64 << 10
	// maxCredentialBytes bounds one credentials file.
	maxCredentialBytes = 16 << 10
	// dirCredentialsTTL is how long a directory's key pair is used before
	// it is read again.
	dirCredentialsTTL = time.Minute
)

// Adapter speaks Bedrock's Converse API over a shared transport.
type Adapter struct {
	rt     http.RoundTripper
	signer *v4.Signer
	now    func() time.Time

	mu    sync.Mutex
	creds map[string]aws.CredentialsProvider // by source: "dir:<path>" or "default:<region>"
	// loadDefault loads the default chain's configuration.
	loadDefault func(ctx context.Context, region string) (aws.Config, error)
}

var (
	_ upstream.OwnCredentials = (*Adapter)(nil)
	_ upstream.Factory        = New
)

// New is the adapter's upstream.Factory.
func New(rt http.RoundTripper) upstream.Adapter {
	return &Adapter{rt: rt, signer: v4.NewSigner(), now: time.Now, creds: map[string]aws.CredentialsProvider{},
		loadDefault: func(ctx context.Context, region string) (aws.Config, error) {
			return config.LoadDefaultConfig(ctx, config.WithRegion(region))
		}}
}

// OwnCredentials marks the adapter as reading its own credentials.
func (a *Adapter) OwnCredentials() {}

// RoundTrip translates, signs and sends one attempt.
func (a *Adapter) RoundTrip(ctx context.Context, t upstream.Target, r upstream.Request) (*http.Response, error) {
	if r.Path != "/v1/chat/completions" {
		return upstream.ErrorResponse(openaiapi.InvalidRequest("", "Amazon Bedrock serves chat completions only: use /v1/chat/completions (the Converse API has no text completions)")), nil
	}
	if t.Settings.Region == "" {
		return nil, errors.New("bedrock: the provider has no region (spec.bedrock.region)")
	}
	tr, apiErr := toConverse(r.Body)
	if apiErr != nil {
		return upstream.ErrorResponse(apiErr), nil
	}
	op := "converse"
	accept := "application/json"
	if tr.Stream {
		op, accept = "converse-stream", "application/vnd.amazon.eventstream"
	}
	u := strings.TrimSuffix(t.BaseURL, "/") + "/model/" + escapeModelID(tr.ModelID) + "/" + op
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(tr.Body))
	if err != nil {
		return nil, fmt.Errorf("bedrock: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	creds, err := a.credentials(ctx, t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(tr.Body)
	if err := a.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningService, t.Settings.Region, a.now()); err != nil {
		return nil, fmt.Errorf("bedrock: sign request: %w", err)
	}
	resp, err := a.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	return a.translate(resp, tr)
}

// escapeModelID escapes a model id or ARN for the path as the AWS SDK
// does: one segment, ':' and '/' escaped.
func escapeModelID(id string) string {
	return strings.ReplaceAll(url.PathEscape(id), ":", "%3A")
}

// translate turns Bedrock's answer into the client's.
func (a *Adapter) translate(resp *http.Response, tr *translated) (*http.Response, error) {
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return upstream.ErrorResponse(translateError(resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), body)), nil
	}
	h := http.Header{}
	if id := resp.Header.Get("X-Amzn-Requestid"); id != "" {
		h.Set("X-Amzn-Requestid", id)
	}
	if tr.Stream {
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Header: h, Body: newStream(resp.Body, tr.ModelID, tr.IncludeUsage, a.now()), ContentLength: -1, Request: resp.Request}, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("bedrock: read response: %w", err)
	}
	if len(body) > maxResponseBytes {
		return upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusBadGateway, Type: openaiapi.ErrTypeServer, Message: fmt.Sprintf("Amazon Bedrock's response is larger than %d bytes", maxResponseBytes)}), nil
	}
	out, err := fromConverse(body, tr.ModelID, a.now())
	if err != nil {
		return upstream.ErrorResponse(&openaiapi.APIError{Status: http.StatusBadGateway, Type: openaiapi.ErrTypeServer, Message: err.Error()}), nil
	}
	h.Set("Content-Type", "application/json")
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header: h, Body: io.NopCloser(bytes.NewReader(out)), ContentLength: int64(len(out)), Request: resp.Request}, nil
}

// credentials returns the target's credentials, from its cache.
func (a *Adapter) credentials(ctx context.Context, t upstream.Target) (aws.Credentials, error) {
	p, err := a.provider(ctx, t)
	if err != nil {
		return aws.Credentials{}, err
	}
	c, err := p.Retrieve(ctx)
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("bedrock: provider %s: credentials: %w", t.Provider, err)
	}
	return c, nil
}

func (a *Adapter) provider(ctx context.Context, t upstream.Target) (aws.CredentialsProvider, error) {
	key := "default:" + t.Settings.Region
	if d := t.Credentials.Dir; d != "" {
		key = "dir:" + d
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.creds[key]; ok {
		return p, nil
	}
	var p aws.CredentialsProvider
	if d := t.Credentials.Dir; d != "" {
		p = aws.NewCredentialsCache(dirCredentials{dir: d, now: a.now})
	} else {
		cfg, err := a.loadDefault(ctx, t.Settings.Region)
		if err != nil {
			return nil, fmt.Errorf("bedrock: provider %s: AWS default credential chain: %w", t.Provider, err)
		}
		if cfg.Credentials == nil {
			return nil, fmt.Errorf("bedrock: provider %s: the AWS default credential chain found no credentials", t.Provider)
		}
		p = cfg.Credentials // LoadDefaultConfig's is an aws.CredentialsCache
	}
	a.creds[key] = p
	return p, nil
}

// dirCredentials reads a key pair from a directory of files (a mounted
// Secret).
type dirCredentials struct {
	dir string
	now func() time.Time
}

func (d dirCredentials) Retrieve(context.Context) (aws.Credentials, error) {
	id, err := readCredential(d.dir, KeyAccessKeyID, true)
	if err != nil {
		return aws.Credentials{}, err
	}
	secret, err := readCredential(d.dir, KeySecretAccessKey, true)
	if err != nil {
		return aws.Credentials{}, err
	}
	token, err := readCredential(d.dir, KeySessionToken, false)
	if err != nil {
		return aws.Credentials{}, err
	}
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token, Source: "switchyard credentials directory",
		CanExpire: true, Expires: d.now().Add(dirCredentialsTTL)}, nil
}

// readCredential reads one file; errors name the file, never its content.
func readCredential(dir, name string, required bool) (string, error) {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("bedrock credentials: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredentialBytes+1))
	if err != nil {
		return "", fmt.Errorf("bedrock credentials: read %s: %w", path, err)
	}
	if len(b) > maxCredentialBytes {
		return "", fmt.Errorf("bedrock credentials: %s is larger than %d bytes", path, maxCredentialBytes)
	}
	v := strings.TrimSpace(string(b))
	if v == "" && required {
		return "", fmt.Errorf("bedrock credentials: %s is empty", path)
	}
	return v, nil
}
