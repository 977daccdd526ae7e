package gateway

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/upstream/azure/azuretest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// TestAzureOpenAIEntraProvider drives the real gateway with the official
// OpenAI client against the fake Azure OpenAI resource and its fake
// Microsoft Entra ID, through a provider with spec.azure.entra (its client
// secret a mounted Secret's key): chat and streams with the application's
// bearer token in place of an api-key, one token for many requests, a new
// one after the resource's 401 without the client noticing, a 401 naming
// Entra's error when the secret is wrong, and a rotated secret taking
// effect without a restart; no log line holds the secret or a token.
func TestAzureOpenAIEntraProvider(t *testing.T) {
	fake := azuretest.New(azureDeployment)
	defer fake.Close()
	secrets := t.TempDir()
	writeSecret(t, secrets, "azure-app", "clientSecret", azuretest.ClientSecret)
	catalog := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: azure-app, namespace: inference}
spec:
  type: AzureOpenAI
  baseURL: %[1]s
  azure:
    apiVersion: "%[4]s"
    entra:
      tenantID: %[5]s
      clientID: %[6]s
      clientSecretRef: {name: azure-app, key: clientSecret}
      authorityHost: %[7]s
  models:
  - {name: %[2]s, servedName: %[3]s}
`, fake.URL, testModel, azureDeployment, azuretest.APIVersion, azuretest.TenantID, azuretest.ClientID, fake.AuthorityHost())
	e, logs := providerGateway(t, catalog, secrets)
	const clientKey = "client-key-not-for-azure"
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey(clientKey), option.WithMaxRetries(0))
	e.router.setTargets(testModel, &routerv1.Target{Id: "provider/azure-app", Url: fake.URL,
		Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: "azure-app", ServedModel: azureDeployment, Type: "AzureOpenAI"})
	params := openai.ChatCompletionNewParams{
		Model:     testModel,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxTokens: openai.Int(16),
	}
	tokens := map[string]bool{} // every bearer Azure saw
	last := func(t *testing.T) azuretest.Request {
		t.Helper()
		r := fake.Requests()
		if len(r) == 0 {
			t.Fatal("nothing reached Azure")
		}
		for _, q := range r {
			tokens[strings.TrimPrefix(q.Authorization, "Bearer ")] = true
		}
		return r[len(r)-1]
	}

	t.Run("chat: the application's token, one for many requests", func(t *testing.T) {
		for range 3 {
			got, err := client.Chat.Completions.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != "echo: hi" || got.Usage.PromptTokens != 9 {
				t.Fatalf("got %+v", got)
			}
		}
		r := last(t)
		if r.APIKey != "" || !strings.HasPrefix(r.Authorization, "Bearer eyJ") || strings.Contains(r.Authorization, clientKey) || r.Deployment != azureDeployment {
			t.Fatalf("Azure saw %+v", r)
		}
		if n := fake.TokenRequests(); n != 1 {
			t.Fatalf("%d token requests for 3 calls, want 1", n)
		}
	})

	t.Run("stream", func(t *testing.T) {
		fake.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Text: []string{"Hel", "lo"}, PromptTokens: 5, CompletionTokens: 2}
		})
		defer fake.SetReply(azuretest.Echo)
		got := streamChat(t, client, params.Messages)
		if got.text != "Hello" || got.usage.CompletionTokens != 2 || fake.TokenRequests() != 1 {
			t.Fatalf("text %q, usage %+v, %d token requests", got.text, got.usage, fake.TokenRequests())
		}
	})

	t.Run("token revoked: a new one, the client none the wiser", func(t *testing.T) {
		fake.Revoke()
		before := fake.TokenRequests()
		if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatal(err)
		}
		if n := fake.TokenRequests() - before; n != 1 {
			t.Fatalf("%d new tokens, want 1", n)
		}
		last(t)
	})

	t.Run("wrong secret: 401 from Entra ID, nothing sent to Azure", func(t *testing.T) {
		writeSecret(t, secrets, "azure-app", "clientSecret", "Wr0ng~secret.0123456789")
		defer writeSecret(t, secrets, "azure-app", "clientSecret", azuretest.ClientSecret)
		n := len(fake.Requests())
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" || apiErr.Code != "provider_credentials" ||
			!strings.Contains(apiErr.Message, "invalid_client") || !strings.Contains(apiErr.Message, "AADSTS7000215") {
			t.Fatalf("err %v", err)
		}
		if strings.Contains(apiErr.RawJSON(), "Wr0ng~secret") || strings.Contains(apiErr.RawJSON(), azuretest.ClientSecret) {
			t.Fatalf("the answer holds a secret: %s", apiErr.RawJSON())
		}
		if len(fake.Requests()) != n {
			t.Fatal("a request without a token reached Azure")
		}
	})

	t.Run("rotated secret: taken on the next request", func(t *testing.T) {
		const rotated = "R0tated~secret.9876543210"
		fake.SetClientSecret(rotated)
		defer fake.SetClientSecret(azuretest.ClientSecret)
		writeSecret(t, secrets, "azure-app", "clientSecret", rotated)
		defer writeSecret(t, secrets, "azure-app", "clientSecret", azuretest.ClientSecret)
		if _, err := client.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatal(err)
		}
		last(t)
	})

	out := logs.String()
	if !strings.Contains(out, "azure-app") {
		t.Errorf("no log line names the provider; is the log captured?\n%s", out)
	}
	delete(tokens, "")
	if len(tokens) < 3 {
		t.Fatalf("Azure saw %d tokens, want one per fetch", len(tokens))
	}
	for _, secret := range append([]string{azuretest.ClientSecret, "Wr0ng~secret", "R0tated~secret"}, keys(tokens)...) {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a secret or token %q:\n%s", secret, out)
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
