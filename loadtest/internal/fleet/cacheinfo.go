package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// CacheInfo is a vLLM worker's KV cache as its /metrics reports it in
// vllm:cache_config_info: NumGPUBlocks is the pool including the null block
// vLLM reserves, so NumGPUBlocks−1 blocks of BlockSize tokens hold KV.
// Reading it from the worker, rather than restating the simulator's
// defaults, keeps a workload sized on the KV cache right under any
// --sim-arg (--num-gpu-blocks-override, --gpu-memory-utilization,
// --block-size).
type CacheInfo struct {
	BlockSize    int `json:"block_size"`
	NumGPUBlocks int `json:"num_gpu_blocks"`
}

var cacheLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ReadCacheInfo scrapes url's /metrics (url without /v1) for
// vllm:cache_config_info.
func ReadCacheInfo(ctx context.Context, client *http.Client, url string) (CacheInfo, error) {
	body, err := getMetrics(ctx, client, url)
	if err != nil {
		return CacheInfo{}, fmt.Errorf("cache info: %w", err)
	}
	defer body.Close()
	return ParseCacheInfo(body)
}

// getMetrics GETs url's /metrics (url without /v1) and returns its body,
// which the caller closes.
func getMetrics(ctx context.Context, client *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// ParseCacheInfo reads the Prometheus text exposition from r and returns
// the first vllm:cache_config_info series' block size and pool.
func ParseCacheInfo(r io.Reader) (CacheInfo, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "vllm:cache_config_info{")
		if !ok {
			continue
		}
		var ci CacheInfo
		var errs []string
		for _, m := range cacheLabel.FindAllStringSubmatch(rest, -1) {
			var dst *int
			switch m[1] {
			case "block_size":
				dst = &ci.BlockSize
			case "num_gpu_blocks":
				dst = &ci.NumGPUBlocks
			default:
				continue
			}
			v, err := strconv.Atoi(m[2])
			if err != nil || v < 1 {
				errs = append(errs, fmt.Sprintf("%s=%q", m[1], m[2]))
				continue
			}
			*dst = v
		}
		if len(errs) > 0 || ci.BlockSize == 0 || ci.NumGPUBlocks == 0 {
			return CacheInfo{}, fmt.Errorf("cache info: vllm:cache_config_info without a usable block_size and num_gpu_blocks (%s)", strings.Join(errs, ", "))
		}
		return ci, nil
	}
	if err := sc.Err(); err != nil {
		return CacheInfo{}, fmt.Errorf("cache info: %w", err)
	}
	return CacheInfo{}, fmt.Errorf("cache info: no vllm:cache_config_info in /metrics")
}
