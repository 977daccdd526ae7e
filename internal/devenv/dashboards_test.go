package devenv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/switchyard-dev/switchyard/internal/devenv"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

const dashboardsDir = "../../deploy/kustomize/components/monitoring/dashboards"

// dashboard is what the tests read of a Grafana dashboard's JSON.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T, file string) dashboard {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// queries are every PromQL expression of a dashboard: its panels'
// targets and its templating variables' queries.
func queries(t *testing.T, file string) []string {
	t.Helper()
	d := readDashboard(t, file)
	var out []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q queries nothing", file, p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok && v.Type == "query" {
			if s, ok := q["query"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// metricNames are the metric names a PromQL expression reads: the
// identifiers that are not functions, keywords, label names (in a by or
// on clause, or a matcher) or numbers. label_values(m, label) reads m.
func metricNames(expr string) []string {
	keywords := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true}
	aggregations := map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "count": true, "stddev": true, "stdvar": true,
		"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true, "limitk": true, "limit_ratio": true}
	var out []string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (!first && c >= '0' && c <= '9')
	}
	skipLabels := false // the next parenthesised list holds label names
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '{' || c == '[':
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			for i < len(expr) && expr[i] != end {
				if expr[i] == '"' {
					i++
					for i < len(expr) && expr[i] != '"' {
						i++
					}
				}
				i++
			}
			i++
		case c == '(' && skipLabels:
			for i < len(expr) && expr[i] != ')' {
				i++
			}
			skipLabels = false
			i++
		case c == '$':
			i++
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			switch {
			case aggregations[word]:
				// sum by (x) (...): an operator, whatever follows it.
			case keywords[strings.ToLower(word)]:
				skipLabels = word != "and" && word != "or" && word != "unless" && word != "bool" && word != "offset"
			case k < len(expr) && expr[k] == '(':
				if word == "label_values" {
					// label_values(metric, label): the metric, then skip.
					m := k + 1
					for m < len(expr) && expr[m] == ' ' {
						m++
					}
					n := m
					for n < len(expr) && isIdent(expr[n], false) {
						n++
					}
					out = append(out, expr[m:n])
					for n < len(expr) && expr[n] != ')' {
						n++
					}
					j = n + 1
				}
			default:
				out = append(out, word)
			}
			i = j
		default:
			i++
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (outcome) (rate(switchyard_meter_requests_total{tenant=~"$tenant",model="a{b}"}[$__rate_interval]))`, []string{"switchyard_meter_requests_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(gen_ai_server_time_to_first_token_seconds_bucket{x="1"}[5m])))`, []string{"gen_ai_server_time_to_first_token_seconds_bucket"}},
		{`sum by (instance) (rate(vllm:prefix_cache_hits_total[1m])) / sum by (instance) (rate(vllm:prefix_cache_queries_total[1m]))`, []string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"}},
		{`sum(a) / on(job) group_left(check) b and c unless 2e3`, []string{"a", "b", "c"}},
		{`sum by (le) (rate(x_bucket[5m])) / count without (i) (y)`, []string{"x_bucket", "y"}},
		{`label_values(switchyard_meter_requests_total, tenant)`, []string{"switchyard_meter_requests_total"}},
		{`1 - switchyard_dependency_up offset 5m`, []string{"switchyard_dependency_up"}},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.expr, got, c.want)
		}
	}
}

// TestDashboardsQueryExportedMetrics: every metric the shipped Grafana
// dashboards query is exported by a running `switchyard dev` (its
// services and its simulated vLLM workers) after some traffic, so a
// renamed metric fails here and not on a dashboard.
func TestDashboardsQueryExportedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end; skipped in -short")
	}
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("dashboards %v (%v): want the tenants' and the fleet's", files, err)
	}
	redisURL, rdb := testkit.Redis(t)
	prefix := testkit.KeyPrefix(t, rdb, "switchyard-test:dash-usage:")
	cfg := catalogConfig()
	cfg.Sim.Port = 0
	cfg.Sim.KVEventsConfig = `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://127.0.0.1:*"}`
	cfg.Auth = true
	cfg.Tenants = []string{"team-a"}
	cfg.RedisURL, cfg.UsageKeyPrefix = redisURL, prefix
	s := start(t, cfg)
	client := openai.NewClient(option.WithBaseURL(s.GatewayURL()+"/v1"), option.WithAPIKey(s.APIKey()), option.WithMaxRetries(0))
	for range 3 {
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("what is on the dashboards?")}, MaxTokens: openai.Int(8),
		})
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
	}
	exported := map[string]bool{}
	scrape := func(url string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || line[0] == '#' {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				exported[line[:i]] = true
			}
		}
	}
	for _, u := range append(s.ServiceMetricsURLs(), s.SimulatedMetricsURLs()...) {
		scrape(u)
	}
	testkit.Eventually(t, 10*time.Second, "the meter's series", func() bool {
		scrape(s.MeterURL() + "/metrics")
		return exported["gen_ai_server_time_to_first_token_seconds_bucket"]
	})
	for _, f := range files {
		n := 0
		for _, q := range queries(t, f) {
			for _, m := range metricNames(q) {
				n++
				if !exported[m] {
					t.Errorf("%s queries %s, which no service of switchyard dev exports (%s)", filepath.Base(f), m, q)
				}
			}
		}
		if n < 10 {
			t.Errorf("%s: %d metrics queried, want a dashboard's worth", filepath.Base(f), n)
		}
	}
	t.Run("a real Prometheus", func(t *testing.T) { againstPrometheus(t, s, files, client) })
}

// prometheusBin is Debian's prometheus, which .ci/run installs.
const prometheusBin = "/usr/bin/prometheus"

// againstPrometheus scrapes the running stack with a real Prometheus and
// asks it every dashboard query, as Grafana would (its variables set to
// match everything): each must parse and run, and the tenant's requests,
// tokens and time to first token must come back with data.
func againstPrometheus(t *testing.T, s *devenv.Stack, files []string, client openai.Client) {
	if _, err := os.Stat(prometheusBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (CI=true requires it)", prometheusBin, err)
		}
		t.Skipf("SKIPPED: needs %s (Debian's prometheus): %v", prometheusBin, err)
	}
	var targets []string
	for _, u := range append(s.ServiceMetricsURLs(), s.SimulatedMetricsURLs()...) {
		targets = append(targets, strconv.Quote(strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/metrics")))
	}
	dir := t.TempDir()
	conf := "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: switchyard\n    static_configs:\n      - targets: [" + strings.Join(targets, ", ") + "]\n"
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	testkit.Process(t, "prometheus", exec.Command(prometheusBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn"))
	query := func(q string) (string, int, error) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		var r struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return "", 0, err
		}
		if r.Status != "success" {
			return r.Error, 0, nil
		}
		return "", len(r.Data.Result), nil
	}
	testkit.Eventually(t, 30*time.Second, "prometheus scraping every target", func() bool {
		_, n, err := query(`up == 1`)
		return err == nil && n == len(targets)
	})
	// Traffic across several scrapes, for rates and quantiles.
	for i := range 8 {
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a panel's worth " + strconv.Itoa(i))}, MaxTokens: openai.Int(8),
		})
		for stream.Next() {
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$tenant", ".*", "$model", ".*", "$worker", ".*")
	var withData []string
	testkit.Eventually(t, 20*time.Second, "the tenant's requests in prometheus", func() bool {
		_, n, _ := query(`sum(switchyard_meter_requests_total{tenant="team-a"})`)
		return n > 0
	})
	for _, f := range files {
		for _, p := range readDashboard(t, f).Panels {
			for _, tg := range p.Targets {
				perr, n, err := query(grafana.Replace(tg.Expr))
				switch {
				case err != nil:
					t.Fatalf("%s / %s: %v", filepath.Base(f), p.Title, err)
				case perr != "":
					t.Errorf("%s / %s: prometheus refuses %q: %s", filepath.Base(f), p.Title, tg.Expr, perr)
				case n > 0:
					withData = append(withData, p.Title)
				}
			}
		}
	}
	for _, want := range []string{"Requests per second, by outcome", "Tokens per second", "Time to first token", "Requests waiting per worker", "Routing decisions by endpoint"} {
		if !slices.Contains(withData, want) {
			t.Errorf("panel %q has no data in prometheus after traffic (panels with data: %v)", want, withData)
		}
	}
	t.Logf("%d panel queries answered with data by prometheus", len(withData))
}
