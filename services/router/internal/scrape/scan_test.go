package scrape

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// parseBoth runs the scan (with its fallback) and the full parser alone.
func parseBoth(in string) (fast, full Metrics, fastErr, fullErr error, scanned bool) {
	fast, fastErr = ParseMetrics(strings.NewReader(in))
	full, fullErr = parseFull([]byte(in))
	var p page
	scanned = scanPage([]byte(in), &p)
	return
}

// agree fails t unless the scan gives what the full parser gives on every
// page the full parser reads (its own errors, "parse metrics: ...", mean
// the page is malformed, and the scan may still read the wanted lines).
func agree(t *testing.T, in string) bool {
	t.Helper()
	fast, full, fastErr, fullErr, scanned := parseBoth(in)
	if fullErr != nil && strings.HasPrefix(fullErr.Error(), "parse metrics:") {
		return scanned
	}
	if (fastErr == nil) != (fullErr == nil) || (fastErr != nil && fastErr.Error() != fullErr.Error()) || fast != full {
		t.Fatalf("scan and full parse disagree on %q:\nscan %+v, %v\nfull %+v, %v", in, fast, fastErr, full, fullErr)
	}
	return scanned
}

func TestScanMatchesFullParse(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		scanned bool // read by the scan alone, without the full parser
	}{
		{"vllm dp2", readFixture(t, "vllm_metrics_dp2.txt"), true},
		{"vllm single", readFixture(t, "vllm_metrics_single.txt"), true},
		{"switchyard sim", readFixture(t, "sim_metrics.txt"), true},
		{"no blank before value", "vllm:num_requests_waiting{engine=\"0\"}3\nvllm:num_requests_running 1\n", true},
		{"blank before labels, trailing comma", "vllm:num_requests_waiting {engine = \"0\" , } 3\nvllm:num_requests_running\t1 1700000000000\n", true},
		{"escaped label values", "vllm:num_requests_waiting{engine=\"a\\\"b\"} 1\nvllm:num_requests_waiting{engine=\"a\\\\\"} 1\nvllm:num_requests_running{engine=\"x\\ny\"} 0\n", true},
		{"counter and untyped types", "# TYPE vllm:num_requests_waiting COUNTER\nvllm:num_requests_waiting 2\n# TYPE vllm:num_requests_running\nvllm:num_requests_running 1\n", true},
		{"infinities", "vllm:num_requests_waiting +Inf\nvllm:num_requests_running 0\n", true},
		{"negative by the name's end", "vllm:num_requests_waiting-1 2\nvllm:num_requests_running 0\n", true},
		{"odd unrelated line", "vllm:num_requests_waiting 1\nvllm:num_requests_running 0\nnot a \"series\n", true},
		{"histogram type", "# TYPE vllm:num_requests_waiting histogram\nvllm:num_requests_waiting_bucket{le=\"+Inf\"} 1\nvllm:num_requests_running 0\n", false},
		{"quoted name", "{\"vllm:num_requests_waiting\"} 4\nvllm:num_requests_running 0\n", false},
		{"hex value", "vllm:num_requests_waiting 0x1p1\nvllm:num_requests_running 0\n", false},
		{"no final newline", "vllm:num_requests_waiting 1\nvllm:num_requests_running 0", false},
		{"bad escape", "vllm:num_requests_waiting{engine=\"\\t\"} 1\nvllm:num_requests_running 0\n", false},
		{"trailing blank", "vllm:num_requests_waiting 1 \nvllm:num_requests_running 0\n", false},
		{"html", "<html>502 Bad Gateway</html>\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := agree(t, c.in); got != c.scanned {
				t.Errorf("scanned without the full parser: %v, want %v", got, c.scanned)
			}
		})
	}
}

// FuzzScanMatchesFullParse is the differential check: wherever the full
// Prometheus parser reads a page, the scan must read the same metrics.
func FuzzScanMatchesFullParse(f *testing.F) {
	for _, name := range []string{"vllm_metrics_dp2.txt", "vllm_metrics_single.txt", "sim_metrics.txt"} {
		f.Add(readFixture(f, name))
	}
	f.Add("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\nvllm:num_requests_running{engine=\"1\"} 2 17\n")
	f.Add("vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"None\"} 1\nvllm:num_requests_waiting 0\nvllm:num_requests_running 0\nprocess_start_time_seconds 1.7e9\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n")
	f.Fuzz(func(t *testing.T, in string) {
		agree(t, in)
	})
}

// TestScanHostileSizes: long lines, many labels and many series are read
// in one pass, and a page past the body limit is never read past it.
func TestScanHostileSizes(t *testing.T) {
	var b strings.Builder
	b.WriteString("vllm:num_requests_running 0\n")
	for i := 0; i < 50000; i++ {
		b.WriteString("vllm:num_requests_waiting{engine=\"0\"} 1\n")
	}
	b.WriteString("x" + strings.Repeat("y", 1<<20) + " 1\n")
	b.WriteString("vllm:num_requests_waiting{" + strings.Repeat("a=\"b\",", 20000) + "} 1\n")
	m, err := ParseMetrics(strings.NewReader(b.String()))
	if err != nil || m.Waiting != 50001 {
		t.Fatalf("got %+v, %v", m, err)
	}
	var p page
	if !scanPage([]byte(b.String()), &p) {
		t.Fatal("the scan gave up on a plain page")
	}
	// An unterminated quote in a wanted line's labels over a megabyte.
	bad := "vllm:num_requests_running 0\nvllm:num_requests_waiting{engine=\"" + strings.Repeat("z", 1<<20) + "\n"
	if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
		t.Fatal("accepted an unterminated label value")
	}
	// Many distinct labels on a line the scan hands to the full parser,
	// whose duplicate check is quadratic: refused before it.
	var q strings.Builder
	q.WriteString("vllm:num_requests_running 0\nvllm:num_requests_waiting{")
	for i := range 20000 {
		fmt.Fprintf(&q, "a%d=\"b\",", i)
	}
	q.WriteString("} 1") // no final newline: not the scan's
	if _, err := ParseMetrics(strings.NewReader(q.String())); err == nil || !strings.Contains(err.Error(), "line 2 has more than 256 labels") {
		t.Fatalf("err = %v, want the label bound on line 2", err)
	}
}

func BenchmarkParseMetrics(b *testing.B) {
	for _, name := range []string{"sim_metrics.txt", "vllm_metrics_dp2.txt"} {
		page := []byte(readFixture(b, name))
		b.Run(strings.TrimSuffix(name, ".txt")+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseMetrics(bytes.NewReader(page)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(strings.TrimSuffix(name, ".txt")+"/full", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parseFull(page); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
