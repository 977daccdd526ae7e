package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
)

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Metrics
		wantErr string
	}{
		{name: "vllm two engines", in: readFixture(t, "vllm_metrics_dp2.txt"),
			want: Metrics{Waiting: 5, Running: 5, KVCacheUsage: 0.5, BlockSize: 16, NumGPUBlocks: 27431, Engines: 2}},
		{name: "vllm one engine, idle, no kv gauge", in: readFixture(t, "vllm_metrics_single.txt"),
			want: Metrics{Waiting: 0, Running: 0, KVCacheUsage: 0, BlockSize: 32, NumGPUBlocks: 9000, Engines: 1}},
		{name: "untyped series without labels",
			in:   "vllm:num_requests_waiting 2\nvllm:num_requests_running 7\nvllm:kv_cache_usage_perc 1.5\n",
			want: Metrics{Waiting: 2, Running: 7, KVCacheUsage: 1, Engines: 1}},
		{name: "not vllm", in: "# TYPE up gauge\nup 1\n", wantErr: "no vllm:num_requests_waiting"},
		{name: "running missing", in: "vllm:num_requests_waiting 1\n", wantErr: "no vllm:num_requests_running"},
		{name: "negative queue", in: "vllm:num_requests_waiting -1\nvllm:num_requests_running 0\n", wantErr: "out of range"},
		{name: "NaN queue", in: "vllm:num_requests_waiting NaN\nvllm:num_requests_running 0\n", wantErr: "out of range"},
		{name: "huge queue", in: "vllm:num_requests_waiting 1e300\nvllm:num_requests_running 0\n", wantErr: "out of range"},
		{name: "garbage", in: "<html>502 Bad Gateway</html>\n", wantErr: "parse metrics"},
		{name: "bad block size ignored",
			in:   "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:cache_config_info{block_size=\"x\"} 1\n",
			want: Metrics{Engines: 1}},
		{name: "process start time",
			in:   "process_start_time_seconds 1.7645904e+09\nvllm:num_requests_waiting 0\nvllm:num_requests_running 0\n",
			want: Metrics{Engines: 1, StartTime: 1.7645904e9}},
		{name: "bad start time ignored",
			in:   "process_start_time_seconds -3\nvllm:num_requests_waiting 0\nvllm:num_requests_running 0\n",
			want: Metrics{Engines: 1}},
		{name: "blocks not yet profiled",
			in:   "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\nvllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1\n",
			want: Metrics{BlockSize: 16, Engines: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMetrics(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseModels(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr string
	}{
		{name: "vllm list",
			in:   `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1749314210,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":40960,"permission":[]},{"id":"my-lora","object":"model","owned_by":"vllm","root":"/adapters/my-lora","parent":"Qwen/Qwen3-8B"}]}`,
			want: []string{"Qwen/Qwen3-8B", "my-lora"}},
		{name: "duplicates and empty ids dropped", in: `{"data":[{"id":"a"},{"id":""},{"id":"a"},{"id":"b"}]}`, want: []string{"a", "b"}},
		{name: "empty list", in: `{"object":"list","data":[]}`, wantErr: "empty"},
		{name: "no data", in: `{"object":"list"}`, wantErr: "no data array"},
		{name: "not json", in: `<html>`, wantErr: "parse model list"},
		{name: "wrong shape", in: `{"data":{"id":"a"}}`, wantErr: "parse model list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModels(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// recorder is a Sink that hands results to the test.
type recorder struct {
	mu      sync.Mutex
	results map[string][]Result
	notify  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{results: map[string][]Result{}, notify: make(chan struct{}, 1)}
}

func (r *recorder) Observe(id string, _ time.Time, res Result) {
	r.mu.Lock()
	r.results[id] = append(r.results[id], res)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// first waits for the first result of id.
func (r *recorder) first(t *testing.T, id string) Result {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		res := r.results[id]
		r.mu.Unlock()
		if len(res) > 0 {
			return res[0]
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no scrape result for %s", id)
		}
	}
}

func TestManagerScrapesRealServers(t *testing.T) {
	metrics := readFixture(t, "vllm_metrics_dp2.txt")
	var modelsHits atomic.Int64
	worker := func(status int, hang bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hang {
				<-r.Context().Done()
				return
			}
			switch r.URL.Path {
			case "/metrics":
				w.WriteHeader(status)
				_, _ = w.Write([]byte(metrics))
			case "/v1/models":
				modelsHits.Add(1)
				_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"Qwen/Qwen3-8B"}]}`))
			default:
				http.NotFound(w, r)
			}
		}))
	}
	ok := worker(http.StatusOK, false)
	defer ok.Close()
	broken := worker(http.StatusInternalServerError, false)
	defer broken.Close()
	hung := worker(http.StatusOK, true)
	defer hung.Close()
	configured := worker(http.StatusOK, false)
	defer configured.Close()
	// A worker set's metricsPath moves the page; /metrics is then a 404.
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/vllm/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(metrics))
	}))
	defer moved.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()

	tests := []struct {
		spec       endpoints.Spec
		wantErr    string
		wantModels []string
	}{
		{spec: endpoints.Spec{ID: "ok", URL: ok.URL}, wantModels: []string{"Qwen/Qwen3-8B"}},
		{spec: endpoints.Spec{ID: "configured", URL: configured.URL, Models: []string{"m"}}},
		{spec: endpoints.Spec{ID: "moved", URL: moved.URL, MetricsPath: "/vllm/metrics", Models: []string{"m"}}},
		{spec: endpoints.Spec{ID: "broken", URL: broken.URL}, wantErr: "status 500"},
		{spec: endpoints.Spec{ID: "hung", URL: hung.URL}, wantErr: "no answer within"},
		{spec: endpoints.Spec{ID: "refused", URL: refusedURL}, wantErr: "connection refused"},
	}
	rec := newRecorder()
	var errCount atomic.Int64
	m := NewManager(Config{
		Interval: time.Hour, // one scrape each: the first runs at once
		Timeout:  300 * time.Millisecond,
		Sink:     rec,
		OnError:  func(string) { errCount.Add(1) },
		Log:      zerolog.Nop(),
	})
	ctx, cancel := context.WithCancel(context.Background())
	specs := make([]endpoints.Spec, 0, len(tests))
	for _, tt := range tests {
		specs = append(specs, tt.spec)
	}
	m.Set(ctx, specs)
	for _, tt := range tests {
		t.Run(tt.spec.ID, func(t *testing.T) {
			res := rec.first(t, tt.spec.ID)
			if tt.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", res.Err, tt.wantErr)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("unexpected error: %v", res.Err)
			}
			if res.Waiting != 5 || res.Running != 5 || res.BlockSize != 16 {
				t.Fatalf("metrics %+v", res.Metrics)
			}
			if strings.Join(res.Models, "|") != strings.Join(tt.wantModels, "|") {
				t.Fatalf("models %q, want %q", res.Models, tt.wantModels)
			}
		})
	}
	cancel()
	m.Wait()
	if got := errCount.Load(); got != 3 {
		t.Errorf("OnError called %d times, want 3", got)
	}
	if got := modelsHits.Load(); got != 1 {
		t.Errorf("/v1/models fetched %d times, want 1 (configured models are not discovered)", got)
	}
}

func TestManagerSetReconciles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n"))
	}))
	defer srv.Close()
	rec := newRecorder()
	m := NewManager(Config{Interval: time.Hour, Timeout: time.Second, Sink: rec, Log: zerolog.Nop()})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); m.Wait() }()

	m.Set(ctx, []endpoints.Spec{{ID: "a", URL: srv.URL, Models: []string{"m"}}})
	rec.first(t, "a")
	// Replace a by b: a's loop must stop, b's must start.
	m.Set(ctx, []endpoints.Spec{{ID: "b", URL: srv.URL, Models: []string{"m"}}})
	rec.first(t, "b")
	m.mu.Lock()
	_, aRunning := m.workers["a"]
	n := len(m.workers)
	m.mu.Unlock()
	if aRunning || n != 1 {
		t.Fatalf("workers after reconcile: a running=%v, count=%d", aRunning, n)
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add(readFixture(f, "vllm_metrics_dp2.txt"))
	f.Add(readFixture(f, "vllm_metrics_single.txt"))
	f.Add("vllm:num_requests_waiting{engine=\"0\"} 1\nvllm:num_requests_running 2\n")
	f.Add("# TYPE vllm:num_requests_waiting histogram\nvllm:num_requests_waiting_bucket{le=\"+Inf\"} 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseMetrics(strings.NewReader(in))
		if err != nil {
			return
		}
		if m.Waiting < 0 || m.Running < 0 || m.KVCacheUsage < 0 || m.KVCacheUsage > 1 || m.BlockSize < 0 {
			t.Fatalf("accepted out-of-range metrics %+v", m)
		}
	})
}

func FuzzParseModels(f *testing.F) {
	f.Add(`{"object":"list","data":[{"id":"a"},{"id":"b"}]}`)
	f.Add(`{"data":[]}`)
	f.Add(`{"data":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		models, err := ParseModels(strings.NewReader(in))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, m := range models {
			if m == "" || seen[m] {
				t.Fatalf("accepted empty or duplicate model in %q", models)
			}
			seen[m] = true
		}
		if len(models) == 0 {
			t.Fatal("accepted empty model list")
		}
	})
}
