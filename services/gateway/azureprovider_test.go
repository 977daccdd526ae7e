package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/upstream/azure/azuretest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const azureDeployment = "gpt-4o-prod"

// writeSecret writes a mounted Secret's key under the secrets directory.
func writeSecret(t *testing.T, dir, secret, key, value string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, secret, key), []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAzureOpenAIProvider drives the real gateway with the official OpenAI
// client against the fake Azure OpenAI resource, which requires the
// deployment's path, the api-version query and the api-key header: chat,
// completions and streams (the prompt-filter chunk dropped, usage read),
// content_filter as the finish reason and as an error, a rate limit's
// Retry-After, a wrong key, and an Entra token in place of a key refused
// before anything is sent; no log line holds the key or the token.
func TestAzureOpenAIProvider(t *testing.T) {
	fake := azuretest.New(azureDeployment)
	defer fake.Close()
	const entra = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJodHRwczovL2NvZ25pdGl2ZXNlcnZpY2VzLmF6dXJlLmNvbSJ9.ZW50cmEtc2lnbmF0dXJl"
	secrets := t.TempDir()
	writeSecret(t, secrets, "azure", "apiKey", azuretest.Key)
	writeSecret(t, secrets, "entra", "token", entra)
	catalog := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: azure, namespace: inference}
spec:
  type: AzureOpenAI
  baseURL: %[1]s
  azure: {apiVersion: "%[4]s"}
  credentials: {secretRef: {name: azure}}
  models:
  - {name: %[2]s, servedName: %[3]s}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: azure-entra, namespace: inference}
spec:
  type: AzureOpenAI
  baseURL: %[1]s
  azure: {apiVersion: "%[4]s"}
  credentials: {secretRef: {name: entra, key: token}}
  models:
  - {name: %[2]s, servedName: %[3]s}
`, fake.URL, testModel, azureDeployment, azuretest.APIVersion)
	e, logs := providerGateway(t, catalog, secrets)
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("client-key-not-for-azure"), option.WithMaxRetries(0))
	route := func(provider string) {
		e.router.setTargets(testModel, &routerv1.Target{Id: "provider/" + provider, Url: fake.URL,
			Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: provider, ServedModel: azureDeployment, Type: "AzureOpenAI"})
	}
	route("azure")
	params := openai.ChatCompletionNewParams{
		Model:     testModel,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("hi")},
		MaxTokens: openai.Int(32),
	}
	last := func(t *testing.T) azuretest.Request {
		t.Helper()
		r := fake.Requests()
		if len(r) == 0 {
			t.Fatal("nothing reached Azure")
		}
		return r[len(r)-1]
	}

	t.Run("chat", func(t *testing.T) {
		fake.SetReply(azuretest.Echo)
		got, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Message.Content != "echo: hi" || got.Choices[0].FinishReason != "stop" || got.Usage.PromptTokens != 9 || got.Usage.CompletionTokens != 3 {
			t.Fatalf("got %+v", got)
		}
		r := last(t)
		if r.Deployment != azureDeployment || r.Op != "chat/completions" || r.APIVersion != azuretest.APIVersion || r.APIKey != azuretest.Key || r.Authorization != "" {
			t.Fatalf("Azure saw %+v", r)
		}
		if !strings.Contains(string(r.Body), `"model":"`+azureDeployment+`"`) || !strings.Contains(string(r.Body), `"max_tokens":32`) {
			t.Errorf("body %s", r.Body)
		}
	})

	t.Run("stream", func(t *testing.T) {
		fake.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Text: []string{"Hel", "lo", " there"}, PromptTokens: 5, CompletionTokens: 3}
		})
		got := streamChat(t, client, params.Messages)
		if len(got.chunks) > 0 && len(got.chunks[0].Choices) == 0 {
			t.Error("the first chunk has no choices: Azure's prompt-filter chunk came through")
		}
		if got.text != "Hello there" || len(got.chunks) != 5 {
			t.Fatalf("text %q in %d chunks", got.text, len(got.chunks))
		}
		if got.usage.PromptTokens != 5 || got.usage.CompletionTokens != 3 {
			t.Fatalf("usage %+v", got.usage)
		}
	})

	t.Run("completions", func(t *testing.T) {
		fake.SetReply(azuretest.Echo)
		got, err := client.Completions.New(t.Context(), openai.CompletionNewParams{Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("say")}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Text != "echo: say" || last(t).Op != "completions" {
			t.Fatalf("got %+v, Azure saw %+v", got, last(t))
		}
	})

	t.Run("content_filter finish reason", func(t *testing.T) {
		fake.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Text: []string{"I can"}, FinishReason: "content_filter", PromptTokens: 4, CompletionTokens: 2}
		})
		got, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].FinishReason != "content_filter" {
			t.Fatalf("finish %q", got.Choices[0].FinishReason)
		}
	})

	t.Run("prompt filtered: OpenAI's error, content_filter", func(t *testing.T) {
		fake.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Status: 400, ErrorBody: `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"violence":{"filtered":true,"severity":"high"}}}}}`}
		})
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "content_filter" || apiErr.Type != "invalid_request_error" || apiErr.Param != "prompt" {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("wrong key: 401", func(t *testing.T) {
		fake.SetReply(azuretest.Echo)
		fake.SetKey("ffffffffffffffffffffffffffffffff")
		defer fake.SetKey(azuretest.Key)
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Code != "401" || strings.Contains(apiErr.Message, azuretest.Key) {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("an Entra token for a key: refused before Azure", func(t *testing.T) {
		route("azure-entra")
		defer route("azure")
		n := len(fake.Requests())
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode < 500 || strings.Contains(apiErr.RawJSON(), entra) {
			t.Fatalf("err %v", err)
		}
		if len(fake.Requests()) != n {
			t.Fatal("a request with an Entra token reached Azure")
		}
	})

	t.Run("rate limited: 429 with Retry-After (last: the gateway then holds the provider off)", func(t *testing.T) {
		fake.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Status: 429, Header: http.Header{"Retry-After": {"3"}}, ErrorBody: `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current pricing tier."}}`}
		})
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "429" || apiErr.Type != "rate_limit_error" {
			t.Fatalf("err %v", err)
		}
		if ra := apiErr.Response.Header.Get("Retry-After"); ra == "" {
			t.Errorf("no Retry-After: %v", apiErr.Response.Header)
		}
	})

	out := logs.String()
	if !strings.Contains(out, "Entra") {
		t.Errorf("the log does not say why the Entra provider failed; is it captured?\n%s", out)
	}
	for _, secret := range []string{azuretest.Key, entra} {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a credential:\n%s", out)
		}
	}
}
