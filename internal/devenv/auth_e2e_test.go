package devenv_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/apikey"
)

// TestDevAuth: `switchyard dev --auth --tenants team-a,team-b` makes a
// key per tenant, prints them (the first in the banner's examples) and
// writes them to the keys file, and the gateway takes each as its
// tenant's (and refuses another key).
func TestDevAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	cfg := catalogConfig()
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = ""
	cfg.Auth = true
	cfg.Tenants = []string{"team-a", "team-b"}
	cfg.KeysFile = filepath.Join(t.TempDir(), "keys.env")
	s := start(t, cfg)
	key := s.APIKey()
	keys := s.APIKeys()
	if !apikey.WellFormed(key) || keys["team-a"] != key || !apikey.WellFormed(keys["team-b"]) || len(keys) != 2 {
		t.Fatalf("dev's keys %q, first %q", keys, key)
	}
	file, err := os.ReadFile(cfg.KeysFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := "team-a=" + key + "\nteam-b=" + keys["team-b"] + "\n"; string(file) != want {
		t.Errorf("keys file %q, want %q", file, want)
	}
	if st, err := os.Stat(cfg.KeysFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("keys file mode %v (%v), want 0600", st.Mode(), err)
	}
	var banner bytes.Buffer
	s.PrintBanner(&banner, cfg)
	if !strings.Contains(banner.String(), "API keys are on") || !strings.Contains(banner.String(), "Authorization: Bearer "+key) ||
		!strings.Contains(banner.String(), keys["team-b"]) {
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
	for tenant, key := range keys {
		if err := chat(key); err != nil {
			t.Fatalf("%s's key: %v", tenant, err)
		}
	}
	var apiErr *openai.Error
	if err := chat(apikey.Generate()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("another key: %v, want 401", err)
	}
}
