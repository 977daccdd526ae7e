package devenv_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/devenv"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// startCatalogStack runs `switchyard dev` on deploy/examples, every
// simulator on a free port. Each simulated GPU runs one sequence at a
// time, so a few concurrent requests build a queue.
func startCatalogStack(t *testing.T) *devenv.Stack {
	t.Helper()
	cfg := catalogConfig()
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*"}`
	cfg.Sim.MaxNumSeqs = 1
	return start(t, cfg)
}

// catalogConfig is dev on deploy/examples with its own services on free
// ports, without Redis, at ten times real time.
func catalogConfig() devenv.Config {
	cfg := devenv.DefaultConfig()
	cfg.Policies = "../../deploy/examples"
	cfg.GatewayAddr, cfg.GatewayMetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.RouterGRPCAddr = "127.0.0.1:0"
	cfg.RouterHTTPAddr = "127.0.0.1:0"
	cfg.KVTrackerHTTPAddr = "127.0.0.1:0"
	cfg.PolicydGRPCAddr = "127.0.0.1:0"
	cfg.PolicydHTTPAddr = "127.0.0.1:0"
	cfg.RedisURL = devenv.NoRedis
	cfg.MeterHTTPAddr = "127.0.0.1:0"
	cfg.Sim.TimeScale = 10
	return cfg
}

// start runs cfg until the test ends.
func start(t *testing.T, cfg devenv.Config) *devenv.Stack {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if os.Getenv("E2E_LOG") != "" {
		log = log.Level(zerolog.DebugLevel)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := devenv.Start(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Stop(); err != nil {
			t.Errorf("stop stack: %v", err)
		}
	})
	return s
}

// Local and provider names of glm-5.3 in deploy/examples.
const (
	glm        = "glm-5.3"
	glmBedrock = "zai.glm-5-3-v1:0"
)

func TestDevCatalogPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	s := startCatalogStack(t)
	c := client(s)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	chat := func(model string, maxTokens int64, opts ...option.RequestOption) (string, error) {
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: model,
			// Not a simple prompt: the complexity classifier would let
			// smart-semantic-routing serve a simple one asked of glm-5.3
			// by the idle qwen-3.6-27b.
			Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Explain step by step why the sky is blue.")},
			MaxTokens: openai.Int(maxTokens),
		}, opts...)
		if err != nil {
			return "", err
		}
		return resp.Model, nil
	}

	t.Run("kvtracker follows policyd to the simulators' own ports", func(t *testing.T) {
		// The catalog names 5557-5559; the simulators publish on free
		// ports, which policyd's copy of the catalog carries.
		for _, w := range []string{"sim-0", "sim-1", "sim-2"} {
			series := `switchyard_kvtracker_worker_connected{pool="sim-gpus",worker="` + w + `"}`
			testkit.Eventually(t, 20*time.Second, w+" connected", func() bool {
				return metricValue(t, s.KVTrackerURL()+"/metrics", series) == 1
			})
		}
	})

	t.Run("alias resolves to a backing model", func(t *testing.T) {
		got, err := chat("standard-model", 4)
		if err != nil {
			t.Fatal(err)
		}
		if got != "qwen-3.6-27b" && got != glm {
			t.Fatalf("standard-model answered as %q, want qwen-3.6-27b or glm-5.3", got)
		}
	})

	t.Run("burst goes to bedrock, pii never leaves", func(t *testing.T) {
		// Queue up glm's one worker.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		record := func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		// The burst policy counts what the router routed since the last
		// scrape, not the scrape alone: of these 12, those past the
		// threshold (2 waiting) already go to bedrock, so the worker's
		// own queue stops at 2.
		var burst, pii []string
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := chat(glm, 96)
				mu.Lock()
				burst = append(burst, m)
				mu.Unlock()
				if err != nil {
					record(err)
				}
			}()
		}
		waitQueued(t, s, "sim-2", 2)

		for range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				m, err := chat(glm, 1)
				mu.Lock()
				burst = append(burst, m)
				mu.Unlock()
				if err != nil {
					record(err)
				}
			}()
			go func() {
				defer wg.Done()
				m, err := chat(glm, 1, option.WithHeader("x-switchyard-tags", "pii-detected"))
				mu.Lock()
				pii = append(pii, m)
				mu.Unlock()
				if err != nil {
					record(err)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			t.Errorf("request: %v", err)
		}
		for _, m := range pii {
			if m != glm {
				t.Errorf("a pii-detected request was served as %q, want the local %q", m, glm)
			}
		}
		sawBedrock := false
		for _, m := range burst {
			sawBedrock = sawBedrock || m == glmBedrock
		}
		if !sawBedrock {
			t.Errorf("untagged requests under burst served as %v, want some by bedrock (%q)", burst, glmBedrock)
		}
	})
}

// waitQueued polls the router until endpoint id has more than n-1
// requests waiting.
func waitQueued(t *testing.T, s *devenv.Stack, id string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.RouterURL() + "/v1/endpoints")
		if err == nil {
			var out struct {
				Endpoints []struct {
					ID      string `json:"id"`
					Waiting string `json:"waiting"`
				} `json:"endpoints"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			for _, e := range out.Endpoints {
				var w int64
				_ = json.Unmarshal([]byte(e.Waiting), &w)
				if e.ID == id && w >= n {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s never had %d requests waiting (last error %v)", id, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
