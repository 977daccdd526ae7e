package fleet

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-switchyard")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"exits at once", "echo 'invalid configuration: --workers' >&2\nexit 2\n", "invalid configuration"},
		{"never announces workers", "echo starting\nexec sleep 30\n", "waiting for its workers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := StartSim(ctx, SimOptions{Bin: script(t, tc.body), Workers: 2, TimeScale: 1, LogDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestGatewayURLLine(t *testing.T) {
	m := gatewayLine.FindStringSubmatch("\nSwitchyard is running.\n\n  gateway    http://127.0.0.1:40123/v1  OpenAI API\n  router ...")
	if m == nil || m[1] != "http://127.0.0.1:40123" {
		t.Errorf("match %q", m)
	}
}

func TestParseCacheInfo(t *testing.T) {
	// What a default `switchyard sim` worker exports (and vLLM, with more
	// labels).
	metrics := "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n" +
		`vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="1781",num_gpu_blocks_override="None"} 1` + "\n"
	ci, err := ParseCacheInfo(strings.NewReader(metrics))
	if err != nil || ci != (CacheInfo{BlockSize: 16, NumGPUBlocks: 1781}) {
		t.Errorf("%+v, %v", ci, err)
	}
	for _, bad := range []string{
		"vllm:num_requests_running 0\n",
		`vllm:cache_config_info{block_size="16",num_gpu_blocks="None"} 1` + "\n",
		`vllm:cache_config_info{num_gpu_blocks="100"} 1` + "\n",
	} {
		if _, err := ParseCacheInfo(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestRouterURLLine(t *testing.T) {
	m := routerLine.FindStringSubmatch("  router     grpc 127.0.0.1:40124  REST http://127.0.0.1:40125: GET /v1/endpoints, POST /v1/route:explain")
	if m == nil || m[1] != "http://127.0.0.1:40125" {
		t.Errorf("match %q", m)
	}
}

func TestWorkerLine(t *testing.T) {
	m := workerLine.FindStringSubmatch("  sim-0   qwen-3.6-27b  http://127.0.0.1:41001  tcp://127.0.0.1:5557  tcp://127.0.0.1:5567")
	if m == nil || m[1] != "sim-0" || m[2] != "http://127.0.0.1:41001" {
		t.Errorf("match %q", m)
	}
	if m := workerLine.FindStringSubmatch("  sim-1  m  http://127.0.0.1:41002  -  -"); m == nil || m[1] != "sim-1" {
		t.Errorf("a worker without KV events: match %q", m)
	}
	if m := workerLine.FindStringSubmatch("  worker  model  HTTP  KV events  replay"); m != nil {
		t.Errorf("the header matched: %q", m)
	}
}
