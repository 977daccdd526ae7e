package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

const bedrockServed = "anthropic.claude-3-5-sonnet-20240620-v1:0"

// TestBedrockProvider drives the real gateway with the official OpenAI
// client against two Bedrock providers on the fake runtime, which checks
// every signature: one whose key pair is a mounted Secret (with a session
// token), one on the AWS default chain (the environment). Chat and
// streams come back in OpenAI's shape; a mid-stream exception is a broken
// stream to the client; an exception before it is OpenAI's error with its
// status; and no log line holds the secret key or the token.
func TestBedrockProvider(t *testing.T) {
	fake := bedrocktest.New()
	defer fake.Close()
	const token = "FwoGZXIvYXdzEFAKE-gateway-session-token"
	fake.SetCredentials(aws.Credentials{AccessKeyID: bedrocktest.AccessKeyID, SecretAccessKey: bedrocktest.SecretAccessKey, SessionToken: token})
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{bedrock.KeyAccessKeyID: bedrocktest.AccessKeyID, bedrock.KeySecretAccessKey: bedrocktest.SecretAccessKey, bedrock.KeySessionToken: token} {
		if err := os.WriteFile(filepath.Join(secrets, "aws", name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AWS_CONFIG_FILE": empty, "AWS_SHARED_CREDENTIALS_FILE": empty, "AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "",
		"AWS_ACCESS_KEY_ID": bedrocktest.AccessKeyID, "AWS_SECRET_ACCESS_KEY": bedrocktest.SecretAccessKey, "AWS_SESSION_TOKEN": token} {
		t.Setenv(k, v)
	}
	catalog := fmt.Sprintf(`apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: bedrock, namespace: inference}
spec:
  type: Bedrock
  baseURL: %[1]s
  bedrock: {region: us-east-1}
  credentials: {secretRef: {name: aws}}
  models:
  - {name: %[2]s, servedName: %[3]q}
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: bedrock-chain, namespace: inference}
spec:
  type: Bedrock
  baseURL: %[1]s
  bedrock: {region: us-east-1}
  models:
  - {name: %[2]s, servedName: %[3]q}
`, fake.URL, testModel, bedrockServed)
	e, logs := providerGateway(t, catalog, secrets)
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	route := func(provider string) {
		e.router.setTargets(testModel, &routerv1.Target{Id: "provider/" + provider, Url: fake.URL,
			Kind: routerv1.TargetKind_TARGET_KIND_PROVIDER, Provider: provider, ServedModel: bedrockServed, Type: "Bedrock"})
	}
	params := openai.ChatCompletionNewParams{
		Model:     testModel,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("hi")},
		MaxTokens: openai.Int(32),
	}

	for _, provider := range []string{"bedrock", "bedrock-chain"} {
		t.Run(provider+": chat", func(t *testing.T) {
			route(provider)
			fake.SetReply(bedrocktest.Echo)
			n := len(fake.Requests())
			got, err := client.Chat.Completions.New(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choices[0].Message.Content != "echo: hi" || got.Choices[0].FinishReason != "stop" || got.Usage.PromptTokens != 7 || got.Usage.CompletionTokens != 3 {
				t.Fatalf("got %+v", got)
			}
			reqs := fake.Requests()
			if len(reqs) != n+1 || reqs[n].ModelID != bedrockServed || reqs[n].Stream {
				t.Fatalf("fake saw %+v", reqs[n:])
			}
			if !strings.Contains(string(reqs[n].Body), `"system":[{"text":"Be brief."}]`) || !strings.Contains(string(reqs[n].Body), `"maxTokens":32`) {
				t.Errorf("Converse body %s", reqs[n].Body)
			}
		})
		t.Run(provider+": stream", func(t *testing.T) {
			route(provider)
			fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
				return bedrocktest.Reply{Text: []string{"Hel", "lo", " there"}, Usage: bedrocktest.Usage{Input: 5, Output: 3, CacheRead: 2}}
			})
			got := streamChat(t, client, params.Messages)
			if got.text != "Hello there" || len(got.chunks) < 5 {
				t.Fatalf("text %q in %d chunks", got.text, len(got.chunks))
			}
			if got.usage.PromptTokens != 7 || got.usage.CompletionTokens != 3 || got.usage.PromptTokensDetails.CachedTokens != 2 {
				t.Fatalf("usage %+v", got.usage)
			}
			if r := fake.Requests(); !r[len(r)-1].Stream {
				t.Fatal("not sent to converse-stream")
			}
		})
	}

	t.Run("mid-stream exception: the stream breaks", func(t *testing.T) {
		route("bedrock")
		fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
			return bedrocktest.Reply{Text: []string{"partial"}, Exception: "ModelStreamErrorException"}
		})
		stream := client.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: testModel, Messages: params.Messages})
		var text strings.Builder
		for stream.Next() {
			for _, c := range stream.Current().Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		if stream.Err() == nil || text.String() != "partial" {
			t.Fatalf("err %v after %q, want an error after the partial text", stream.Err(), text.String())
		}
	})

	t.Run("exception before the answer: OpenAI's error", func(t *testing.T) {
		route("bedrock")
		fake.SetReply(func(bedrocktest.Request) bedrocktest.Reply {
			return bedrocktest.Reply{Status: 400, ErrorType: "ValidationException", ErrorMessage: "The model returned a validation error."}
		})
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "ValidationException" || !strings.Contains(apiErr.Message, "validation error") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("completions refused", func(t *testing.T) {
		route("bedrock")
		n := len(fake.Requests())
		_, err := client.Completions.New(t.Context(), openai.CompletionNewParams{Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
			t.Fatalf("err %v", err)
		}
		if len(fake.Requests()) != n {
			t.Fatal("a completions request reached Bedrock")
		}
	})

	t.Run("wrong key: refused by the signature check, 403", func(t *testing.T) {
		route("bedrock")
		fake.SetReply(bedrocktest.Echo)
		fake.SetCredentials(aws.Credentials{AccessKeyID: bedrocktest.AccessKeyID, SecretAccessKey: "another-secret", SessionToken: token})
		defer fake.SetCredentials(aws.Credentials{AccessKeyID: bedrocktest.AccessKeyID, SecretAccessKey: bedrocktest.SecretAccessKey, SessionToken: token})
		_, err := client.Chat.Completions.New(t.Context(), params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden || strings.Contains(apiErr.Message, bedrocktest.SecretAccessKey) {
			t.Fatalf("err %v", err)
		}
	})

	out := logs.String()
	if !strings.Contains(out, "upstream response broke off") {
		t.Errorf("the log lacks the broken stream; is it captured?\n%s", out)
	}
	for _, secret := range []string{bedrocktest.SecretAccessKey, token} {
		if strings.Contains(out, secret) {
			t.Errorf("a log line holds a credential:\n%s", out)
		}
	}
}
