package router_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/services/router"
)

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodFile := write("good.yaml", "- id: f0\n  url: http://10.0.0.1:8000\n  models: [m]\n")
	dupFile := write("dup.yaml", "- id: a\n  url: http://10.0.0.1:8000\n")
	badFile := write("bad.yaml", "- id: f0\n  url: http://10.0.0.1:8000\n  modle: m\n")

	tests := []struct {
		name    string
		edit    func(*router.Config)
		wantErr []string // all must appear; none means valid
	}{
		{name: "shorthand", edit: func(c *router.Config) {}},
		{name: "file only", edit: func(c *router.Config) { c.Endpoints, c.EndpointsFile = "", goodFile }},
		{name: "both sources", edit: func(c *router.Config) { c.EndpointsFile = goodFile }},
		{name: "nats disabled", edit: func(c *router.Config) { c.NATS.URL = "" }},
		{name: "nats server list", edit: func(c *router.Config) { c.NATS.URL = "nats://n1:4222, nats://n2:4222" }},
		{name: "no endpoints", edit: func(c *router.Config) { c.Endpoints = "" }, wantErr: []string{"no endpoints"}},
		{name: "endpoints from policyd only", edit: func(c *router.Config) { c.Endpoints, c.PolicydAddr = "", "127.0.0.1:9092" }},
		{name: "policyd and static endpoints", edit: func(c *router.Config) { c.PolicydAddr, c.GatewayBackend = "policyd:9092", "dev" }},
		{name: "bad policyd addr", edit: func(c *router.Config) { c.PolicydAddr = "policyd" }, wantErr: []string{"policyd-addr"}},
		{name: "bad endpoint url", edit: func(c *router.Config) { c.Endpoints = "a=localhost:8000" },
			wantErr: []string{"endpoints:", `target "localhost:8000": want http:// or https://`}},
		{name: "worker without url", edit: func(c *router.Config) { c.Endpoints = "a=tcp://h:5557" },
			wantErr: []string{`worker "a" has no url`}},
		{name: "one line for router and kvtracker", edit: func(c *router.Config) {
			c.Endpoints = "a=http://127.0.0.1:8001|tcp://127.0.0.1:5557|tcp://127.0.0.1:5567"
		}},
		{name: "duplicate id in shorthand", edit: func(c *router.Config) { c.Endpoints = "a=http://x,a=http://y" },
			wantErr: []string{`duplicate id "a"`}},
		{name: "duplicate id across sources", edit: func(c *router.Config) { c.EndpointsFile = dupFile },
			wantErr: []string{"endpoints and endpoints-file", `duplicate id "a"`}},
		{name: "missing file", edit: func(c *router.Config) { c.EndpointsFile = filepath.Join(dir, "nope.yaml") },
			wantErr: []string{"endpoints-file:", "no such file"}},
		{name: "misspelt field in file", edit: func(c *router.Config) { c.EndpointsFile = badFile },
			wantErr: []string{"bad.yaml", "unknown field"}},
		{name: "bad grpc addr", edit: func(c *router.Config) { c.GRPCAddr = "9090" }, wantErr: []string{"grpc-addr"}},
		{name: "bad http port", edit: func(c *router.Config) { c.HTTPAddr = ":notaport" }, wantErr: []string{"http-addr", "bad port"}},
		{name: "bad nats scheme", edit: func(c *router.Config) { c.NATS.URL = "http://127.0.0.1:4222" }, wantErr: []string{"nats-url", "scheme"}},
		{name: "nats password not echoed", edit: func(c *router.Config) { c.NATS.URL = "redis://u:hunter2@h:1" }, wantErr: []string{"nats-url"}},
		{name: "empty router id", edit: func(c *router.Config) { c.RouterID = " " }, wantErr: []string{"router-id"}},
		{name: "zero durations", edit: func(c *router.Config) {
			c.ScrapeInterval, c.ScrapeTimeout, c.InflightTTL, c.ShutdownTimeout = 0, -time.Second, 0, 0
		}, wantErr: []string{"scrape-interval", "scrape-timeout", "inflight-ttl", "shutdown-timeout"}},
		{name: "redis and tokenizers", edit: func(c *router.Config) {
			c.Redis.URL, c.Tokenizers = "redis://:pw@127.0.0.1:6379/2", "qwen=simple, llama = none ,*=simple"
		}},
		{name: "bad redis url", edit: func(c *router.Config) { c.Redis.URL = "http://u:hunter2@h:1" }, wantErr: []string{"redis-url"}},
		{name: "bad tokenizer kind", edit: func(c *router.Config) { c.Tokenizers = "m=bpe" }, wantErr: []string{"tokenizers", `"bpe"`}},
		{name: "tokenizer kind without argument", edit: func(c *router.Config) { c.Tokenizers = "m=simple:x" }, wantErr: []string{"tokenizers", "simple takes no argument"}},
		{name: "tokenizer entry without kind", edit: func(c *router.Config) { c.Tokenizers = "m" }, wantErr: []string{"tokenizers", "model=kind"}},
		{name: "hf tokenizer directory missing", edit: func(c *router.Config) { c.Tokenizers = "m=hf:" + filepath.Join(dir, "nope") },
			wantErr: []string{"tokenizers", "not a Hugging Face model directory"}},
		{name: "model listed twice", edit: func(c *router.Config) { c.Tokenizers = "m=none,m=simple" }, wantErr: []string{"listed twice"}},
		{name: "bad kv knobs", edit: func(c *router.Config) {
			c.SpeculativeTTL, c.ApproxTTL, c.RecomputeWeight, c.PrefillRatePrior = -time.Second, -time.Second, -1, 0
		}, wantErr: []string{"kv-speculative-ttl", "approx-ttl", "recompute-weight", "prefill-rate-prior"}},
		{name: "bad tokenizer check timings", edit: func(c *router.Config) {
			c.TokenizerCheckInterval, c.TokenizerCheckRetry, c.TokenizerCheckTimeout = time.Second, time.Minute, 0
		}, wantErr: []string{"tokenizer-check-timeout", "tokenizer-check-retry: 1m0s is longer than tokenizer-check-interval 1s"}},
		{name: "tokenizer check off ignores its timings", edit: func(c *router.Config) {
			c.TokenizerCheck, c.TokenizerCheckInterval = false, 0
		}},
		{name: "classifiers in another order", edit: func(c *router.Config) { c.Classifiers = " tenant-tags , header-tags" }},
		{name: "no classifiers", edit: func(c *router.Config) { c.Classifiers = "" }},
		{name: "unknown classifier", edit: func(c *router.Config) { c.Classifiers = "header-tags,ner" },
			// (this test binary registers a test classifier too: see cancel_test.go)
			wantErr: []string{`classifiers: unknown classifier "ner": want one of `, `complexity, `, `header-tags, pii, pii-rules, tenant-tags`}},
		{name: "limits off", edit: func(c *router.Config) { c.MaxMessages, c.MaxPromptBytes, c.MaxTemplateBytes = 0, 0, 0 }},
		{name: "negative limits", edit: func(c *router.Config) { c.MaxMessages, c.MaxPromptBytes, c.MaxTemplateBytes = -1, -1, -1 },
			wantErr: []string{"max-messages: must not be negative", "max-prompt-bytes: must not be negative", "max-template-bytes: must not be negative"}},
		{name: "template limit below prompt limit", edit: func(c *router.Config) { c.MaxPromptBytes, c.MaxTemplateBytes = 2<<20, 1<<20 },
			wantErr: []string{"max-template-bytes: 1048576 is below max-prompt-bytes 2097152"}},
		{name: "classifier listed twice", edit: func(c *router.Config) { c.Classifiers = "tenant-tags,tenant-tags" },
			wantErr: []string{`classifiers: classifier "tenant-tags" listed twice`}},
		{name: "several problems reported together", edit: func(c *router.Config) { c.GRPCAddr, c.Endpoints = "", "" },
			wantErr: []string{"grpc-addr: empty", "no endpoints"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := router.DefaultConfig()
			cfg.Endpoints = "a=http://127.0.0.1:8001,b=http://127.0.0.1:8002"
			tt.edit(&cfg)
			err := cfg.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error leaks a password: %v", err)
			}
		})
	}
}

func TestRegisterFlags(t *testing.T) {
	var cfg router.Config
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	err := fs.Parse([]string{
		"--grpc-addr=127.0.0.1:7000", "--endpoints=a=http://w:8000", "--nats-url=",
		"--scrape-interval=250ms", "--inflight-ttl=1m", "--redis-url=redis://r:6379", "--tokenizers=*=none",
		"--kv-speculative-ttl=3s", "--recompute-weight=0.5", "--classifiers=tenant-tags",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := router.DefaultConfig()
	want.GRPCAddr, want.Endpoints, want.NATS.URL = "127.0.0.1:7000", "a=http://w:8000", ""
	want.ScrapeInterval, want.InflightTTL = 250*time.Millisecond, time.Minute
	want.Redis.URL, want.Tokenizers, want.SpeculativeTTL, want.RecomputeWeight = "redis://r:6379", "*=none", 3*time.Second, 0.5
	want.Classifiers = "tenant-tags"
	if cfg != want {
		t.Fatalf("flags gave %+v\nwant       %+v", cfg, want)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("flag defaults plus endpoints do not validate: %v", err)
	}
}
