package devenv_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/apikey"
)

// TestDevAuth: `switchyard dev --auth` makes a key, prints it with the
// banner's examples, and the gateway takes it (and refuses a request
// without it).
func TestDevAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	cfg := catalogConfig()
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = ""
	cfg.Auth = true
	s := start(t, cfg)
	key := s.APIKey()
	if !apikey.WellFormed(key) {
		t.Fatalf("dev's key %q", key)
	}
	var banner bytes.Buffer
	s.PrintBanner(&banner, cfg)
	if !strings.Contains(banner.String(), "API keys are on") || !strings.Contains(banner.String(), "Authorization: Bearer "+key) {
		t.Errorf("the banner does not show the key and how to send it:\n%s", banner.String())
	}
	chat := func(key string) error {
		client := openai.NewClient(option.WithBaseURL(s.GatewayURL()+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
		_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:     "qwen-3.6-27b",
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			MaxTokens: openai.Int(4),
		})
		return err
	}
	if err := chat(key); err != nil {
		t.Fatalf("dev's key: %v", err)
	}
	var apiErr *openai.Error
	if err := chat(apikey.Generate()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another key: %v, want 401", err)
	}
}
