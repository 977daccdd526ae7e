package devenv

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
)

// simulated is one simulator the stack started: a vLLM worker or an
// external provider's stand-in.
type simulated struct {
	provider   bool
	name       string
	models     string
	url        string
	kv, replay string
	// api is what a provider's stand-in speaks, for the banner.
	api string
	// vllm: it serves vLLM's /metrics (a worker, or a provider simulated
	// by one), which the Bedrock fake does not.
	vllm bool
}

// ServiceMetricsURLs are the /metrics pages of the stack's services.
func (s *Stack) ServiceMetricsURLs() []string {
	metrics := []string{s.GatewayMetricsURL(), s.RouterURL() + "/metrics"}
	if s.policyd != nil {
		metrics = append(metrics, "http://"+s.policyd.HTTPAddr()+"/metrics")
	}
	if s.tracker != nil {
		metrics = append(metrics, s.KVTrackerURL()+"/metrics")
	}
	if s.meter != nil {
		metrics = append(metrics, s.MeterURL()+"/metrics")
	}
	return metrics
}

// SimulatedMetricsURLs are the /metrics pages of the simulated workers
// and providers (vLLM's metric names); a Bedrock fake has none.
func (s *Stack) SimulatedMetricsURLs() []string {
	var out []string
	for _, sim := range s.sims {
		if sim.vllm {
			out = append(out, strings.TrimSuffix(sim.url, "/v1")+"/metrics")
		}
	}
	return out
}

// PrintBanner tells the user what runs where — every listening address,
// the metrics pages — and what to try first. It is written in one piece,
// so log lines cannot cut into it. Its gateway line ("  gateway  URL/v1")
// is what programs that run `switchyard dev` (loadtest) read.
func (s *Stack) PrintBanner(w io.Writer, cfg Config) {
	var b bytes.Buffer
	s.writeBanner(&b, cfg)
	_, _ = w.Write(b.Bytes())
}

func (s *Stack) writeBanner(out io.Writer, cfg Config) {
	slices.SortStableFunc(s.sims, func(a, b simulated) int { return strings.Compare(a.name, b.name) })
	var workers, providers int
	for _, sim := range s.sims {
		if sim.provider {
			providers++
		} else {
			workers++
		}
	}
	switch {
	case s.catalog != nil:
		fmt.Fprintf(out, "\nSwitchyard is running the catalog %s: %d simulated vLLM workers, %d simulated providers, time scale %gx.\n\n",
			cfg.Policies, workers, providers, cfg.Sim.TimeScale)
	case cfg.Endpoints != "":
		fmt.Fprintf(out, "\nSwitchyard is running in front of the workers %s.\n\n", cfg.Endpoints)
	default:
		fmt.Fprintf(out, "\nSwitchyard is running: %d simulated vLLM workers, time scale %gx.\n\n", workers, cfg.Sim.TimeScale)
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  gateway\t%s/v1\tOpenAI API\n", s.GatewayURL())
	fmt.Fprintf(tw, "  router\tgrpc %s\tREST %s: GET /v1/endpoints, POST /v1/route:explain\n", s.RouterGRPCAddr(), s.RouterURL())
	if s.policyd != nil {
		fmt.Fprintf(tw, "  policyd\tgrpc %s\tREST http://%s: GET /v1/policy/snapshot\n", s.policyd.GRPCAddr(), s.policyd.HTTPAddr())
	}
	if s.tracker != nil {
		fmt.Fprintf(tw, "  kvtracker\t%s\treads the workers' KV events, publishes them on NATS\n", s.KVTrackerURL())
	}
	if s.meter != nil {
		fmt.Fprintf(tw, "  meter\t%s\tcounts usage: GET /v1/usage?tenant=T&since=1h, yardctl usage\n", s.MeterURL())
	} else {
		fmt.Fprintf(tw, "  meter\toff\tneeds Redis (--redis-url or REDIS_URL)\n")
	}
	nats := "embedded, JetStream"
	if s.nats == nil {
		nats = "external"
	}
	fmt.Fprintf(tw, "  NATS\t%s\t%s\n", configcheck.Redact(s.natsURL), nats)
	if s.redisURL != "" {
		fmt.Fprintf(tw, "  Redis\t%s\tKV snapshots, usage rollups\n", configcheck.Redact(s.redisURL))
	} else {
		fmt.Fprintf(tw, "  Redis\tnone\tKV snapshots and metering off (--redis-url or REDIS_URL to use one)\n")
	}
	tw.Flush()

	if workers > 0 {
		fmt.Fprintln(out)
		fmt.Fprintf(tw, "  worker\tmodel\tHTTP\tKV events\treplay\n")
		for _, sim := range s.sims {
			if !sim.provider {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", sim.name, sim.models, sim.url, orDash(sim.kv), orDash(sim.replay))
			}
		}
		tw.Flush()
	}
	if providers > 0 {
		fmt.Fprintln(out)
		fmt.Fprintf(tw, "  provider\tserves\tbase URL\tAPI\n")
		for _, sim := range s.sims {
			if sim.provider {
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", sim.name, sim.models, sim.url, sim.api)
			}
		}
		tw.Flush()
	}

	fmt.Fprintf(out, "\nPrometheus metrics:\n  %s\n", strings.Join(s.ServiceMetricsURLs(), "\n  "))
	if workers > 0 {
		fmt.Fprintf(out, "  and each worker's vLLM metrics at <HTTP>/metrics\n")
	}

	if s.catalog != nil && len(s.catalog.keys) > 0 {
		// Shown once, here: dev's keys live as long as this process.
		fmt.Fprintf(out, "\nAPI keys are on (every request needs one):\n\n")
		for _, k := range s.catalog.keys {
			fmt.Fprintf(out, "  tenant %-12s %s\n", k.tenant, k.key)
		}
	}
	if s.catalog != nil {
		var try bytes.Buffer
		printCatalogTry(&try, s, cfg)
		text := try.String()
		if key := s.APIKey(); key != "" {
			text = strings.ReplaceAll(text, "-H 'Content-Type: application/json'", "-H 'Content-Type: application/json' -H 'Authorization: Bearer "+key+"'")
		}
		_, _ = io.WriteString(out, text)
	} else {
		model := cfg.Sim.Models()[0]
		fmt.Fprintf(out, `
Try:

  curl -s %s/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"%s","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'

The same through Anthropic's Messages API:

  curl -s %s/v1/messages -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' \
    -d '{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"Hello!"}]}'

Ctrl-C stops everything.
`, s.GatewayURL(), model, s.GatewayURL(), model)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printCatalogTry shows the catalog's policies at work: an alias, burst
// routing to providers, PII kept local.
func printCatalogTry(out io.Writer, s *Stack, cfg Config) {
	cf := s.catalog
	alias := "standard-model"
	if len(cf.aliases) > 0 {
		alias = cf.aliases[0]
	}
	model := "qwen-3.6-27b"
	if len(cf.models) > 0 {
		model = cf.models[0]
	}
	fmt.Fprintf(out, `
Local models: %s. Aliases: %s.

An alias resolves to the backing model predicted fastest:

  curl -s %s/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"%s","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'

Anthropic's Messages API serves the same models (streaming, tools, count_tokens):

  curl -s %s/v1/messages -H 'Content-Type: application/json' -H 'anthropic-version: 2023-06-01' \
    -d '{"model":"%s","max_tokens":16,"messages":[{"role":"user","content":"Hello!"}]}'

Burst routing: once every local worker of a model has more than 2 queued
prompts, burst-policy sends requests to the providers (bedrock, then
databricks); the response's "model" then carries the provider's name for
it. bedrock is a fake Amazon Bedrock runtime: the gateway signs each
request with SigV4, the fake checks it and answers with an echo of the
prompt. Queue up a few hundred long requests and watch where they go:

  for i in $(seq 300); do curl -s %s/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"%s","messages":[{"role":"user","content":"Hi"}],"max_tokens":2000}' -o /dev/null & done
  curl -s %s/v1/endpoints

Prompts tagged pii-detected never leave the cluster (fail closed when no
local worker can take them):

  curl -s %s/v1/chat/completions -H 'Content-Type: application/json' -H 'x-switchyard-tags: pii-detected' \
    -d '{"model":"%s","messages":[{"role":"user","content":"My IBAN is ..."}],"max_tokens":16}'

Edit the YAML under %s and policyd reloads it. Ctrl-C stops everything.
`, strings.Join(cf.models, ", "), strings.Join(cf.aliases, ", "),
		s.GatewayURL(), alias, s.GatewayURL(), alias, s.GatewayURL(), model, s.RouterURL(), s.GatewayURL(), model, cf.dir)
}
