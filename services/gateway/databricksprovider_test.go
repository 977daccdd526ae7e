package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/upstream/databricks/databrickstest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const databricksEndpoint = "databricks-meta-llama-3-3-70b-instruct"

// TestDatabricksProvider drives the real gateway with the official OpenAI
// client against the fake Databricks workspace: a provider with a
// personal access token and one with an OAuth service principal (its
// secret a mounted Secret's key), chat and streams; the OAuth provider
// gets one token for many requests, a new one after a 401 without the
// client noticing, and a 401 when its secret is wrong; errors come back in
// OpenAI's shape; no log line holds the token, the secret or an access
// token.
func TestDatabricksProvider(t *testing.T) {
	fake := databrickstest.New(databricksEndpoint)
	defer fake.Close()
	secrets := t.TempDir()
	writeSecret(t, secrets, "dbx-pat", "apiKey", databrickstest.PAT)
	writeSecret(t, secrets, "dbx-sp", "clientSecret", databrickstest.ClientSecret)
	catalog := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: dbx-pat, namespace: inference}
spec:
  type: Databricks
  baseURL: %[1]s
  credentials: {secretRef: {name: dbx-pat}}
  models:
  - {name: %[2]s, servedName: %[3]s}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: dbx-oauth, namespace: inference}
spec:
  type: Databricks
  baseURL: %[1]s
  databricks:
    oauth: {clientID: %[4]s, clientSecretRef: {name: dbx-sp, key: clientSecret}}
  models:
  - {name: %[2]s, servedName: %[3]s}
`, fake.BaseURL(), testModel, databricksEndpoint, databrickstest.ClientID)
	e, logs := providerGateway(t, catalog, secrets)
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("client-key-not-for-databricks"), option.WithMaxRetries(0))
	route := func(provider string) {
		e.router.setTargets(testModel, &routerv1.Target{Id: "provider/" + provider, Url: fake.BaseURL(),
			Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: provider, ServedModel: databricksEndpoint, Type: "Databricks"})
	}
	params := openai.ChatCompletionNewParams{
		Model:     testModel,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxTokens: openai.Int(16),
	}
	last := func(t *testing.T) databrickstest.Request {
		t.Helper()
		r := fake.Requests()
		if len(r) == 0 {
			t.Fatal("nothing reached Databricks")
		}
		return r[len(r)-1]
	}

	for _, provider := range []string{"dbx-pat", "dbx-oauth"} {
		t.Run(provider+": chat", func(t *testing.T) {
			route(provider)
			got, err := client.Chat.Completions.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != "echo: hi" || got.Usage.PromptTokens != 8 || got.Usage.CompletionTokens != 2 {
				t.Fatalf("got %+v", got)
			}
			r := last(t)
			if r.Path != "/serving-endpoints/chat/completions" || !strings.Contains(string(r.Body), `"model":"`+databricksEndpoint+`"`) {
				t.Fatalf("Databricks saw %+v", r)
			}
			if provider == "dbx-pat" && r.Authorization != "Bearer "+databrickstest.PAT {
				t.Fatalf("authorization %q", r.Authorization)
			}
			if provider == "dbx-oauth" && (r.Authorization == "Bearer "+databrickstest.PAT || !strings.HasPrefix(r.Authorization, "Bearer eyJ")) {
				t.Fatalf("authorization %q", r.Authorization)
			}
		})
		t.Run(provider+": stream", func(t *testing.T) {
			route(provider)
			fake.SetReply(func(databrickstest.Request) databrickstest.Reply {
				return databrickstest.Reply{Text: []string{"Hel", "lo", " there"}}
			})
			defer fake.SetReply(databrickstest.Echo)
			got := streamChat(t, client, params.Messages)
			if got.text != "Hello there" || got.usage.PromptTokens != 8 || got.usage.CompletionTokens != 2 {
				t.Fatalf("text %q usage %+v", got.text, got.usage)
			}
		})
	}

	t.Run("oauth: one token, a new one after a 401", func(t *testing.T) {
		route("dbx-oauth")
		if n := fake.TokenRequests(); n != 1 {
			t.Fatalf("%d token requests for the calls so far, want 1", n)
		}
		fake.Revoke()
		if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatal(err)
		}
		if n := fake.TokenRequests(); n != 2 {
			t.Fatalf("%d token requests after a revocation, want 2", n)
		}
	})

	t.Run("errors: OpenAI's shape", func(t *testing.T) {
		route("dbx-pat")
		fake.SetReply(func(databrickstest.Request) databrickstest.Reply {
			return databrickstest.Reply{Status: 400, ErrorBody: `{"error_code":"BAD_REQUEST","message":"Input validation error: max_tokens must be at most 4096"}`}
		})
		defer fake.SetReply(databrickstest.Echo)
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "BAD_REQUEST" || apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "max_tokens") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("oauth: a wrong secret is a 401", func(t *testing.T) {
		route("dbx-oauth")
		writeSecret(t, secrets, "dbx-sp", "clientSecret", "rotated-to-the-wrong-secret-0000")
		defer writeSecret(t, secrets, "dbx-sp", "clientSecret", databrickstest.ClientSecret)
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || strings.Contains(apiErr.RawJSON(), "rotated-to-the-wrong") {
			t.Fatalf("err %v", err)
		}
	})

	out := logs.String()
	if out == "" {
		t.Error("the gateway logged nothing: the check below would prove nothing")
	}
	for _, secret := range []string{databrickstest.PAT, databrickstest.ClientSecret, "fake-dbx-oauth", "rotated-to-the-wrong"} {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a credential (%s):\n%s", secret, out)
		}
	}
}
