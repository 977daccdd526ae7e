package router_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/tokenizer"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

// BenchmarkRouteHFChat is Route end to end over real gRPC, 16 endpoints,
// with a real Hugging Face tokenizer and chat template (Qwen3 fixture from
// `make testdata`): what a router pays per request on a real model,
// render + tokenize included. Modes:
//   - cold: every request is a conversation never seen before;
//   - multi-turn: the history was sent on the previous turn and one new
//     assistant + user exchange is appended, as chat clients do.
func BenchmarkRouteHFChat(b *testing.B) {
	dir := hfFixture(b)
	workers := benchWorkers(b)
	tr := startRouter(b, func(c *router.Config) {
		slowScrapes(c)
		c.InflightTTL = benchInflightTTL
		c.PrefillRatePrior = benchPrefillRate
		c.Tokenizers = "*=hf:" + dir
	}, workers...)
	routeChats(b, tr.client, 0, tr.srv.HTTPAddr())
}

// benchInflightTTL stands in for completions, which never arrive here (no
// NATS, no scrapes): a fleet whose requests finish within seconds. Without
// it every routed request would stay queued for the whole run, the
// predicted TTFTs and with them the router's speculative index entries
// would grow without bound, and each sub-benchmark would pay for the
// garbage of the ones before it (8k multi-turn: 40 % more router CPU
// after 8k cold than on a fresh router).
const benchInflightTTL = 2 * time.Second

// benchPrefillRate (tokens/s per worker) makes the 16 workers a fleet
// that keeps up with the benchmark, whose client sends hundreds of cold
// 8k prompts a second (millions of prefill tokens a second). At the
// default prior (2,700 tokens/s, one GPU's worth) the router predicts a
// queue of minutes and keeps every prompt's speculative blocks that long:
// after 5,600 cold 8k requests they held 168 MB of live heap, against
// 80 MB with this prior (most of it the approximate index's two minutes).
const benchPrefillRate = 1e6

// BenchmarkRouteHFChatProcess is BenchmarkRouteHFChat against a router in
// its own process (`switchyard router`, built for the run): the
// benchmark client's work and garbage no longer share the router's CPU
// time and heap, as in a deployment.
func BenchmarkRouteHFChatProcess(b *testing.B) {
	dir, err := filepath.Abs(hfFixture(b))
	if err != nil {
		b.Fatal(err)
	}
	workers := benchWorkers(b)
	// SWITCHYARD_BENCH_BIN runs a given build instead, so that two builds
	// can be compared turn about on the same machine.
	bin := os.Getenv("SWITCHYARD_BENCH_BIN")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "switchyard")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/switchyard").CombinedOutput(); err != nil {
			b.Fatalf("build switchyard: %v\n%s", err, out)
		}
	}
	grpcAddr, httpAddr := freeAddr(b), freeAddr(b)
	var eps []string
	for i, w := range workers {
		eps = append(eps, workerID(i)+"="+w.URL())
	}
	cmd := exec.Command(bin, "router", "--grpc-addr", grpcAddr, "--http-addr", httpAddr,
		"--nats-url", "", "--endpoints", strings.Join(eps, ","), "--scrape-interval", "1h",
		"--tokenizers", "*=hf:"+dir, "--log-level", "warn", "--pprof",
		"--inflight-ttl", benchInflightTTL.String(),
		"--prefill-rate-prior", strconv.FormatFloat(benchPrefillRate, 'f', -1, 64))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	waitFor(b, "router process ready", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	routeChats(b, routerv1.NewRouterClient(conn), cmd.Process.Pid, httpAddr)
}

// cpuTime is a process's user+system CPU time from /proc (Linux; 0
// elsewhere).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the ")" closing the command name: utime is the 12th,
	// stime the 13th, in clock ticks (100 per second on Linux).
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func hfFixture(b *testing.B) string {
	dir := filepath.Join("..", "..", "testdata-cache", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		b.Skipf("SKIP: fixture tokenizer not fetched; run `make testdata` (%v)", err)
	}
	return dir
}

func benchWorkers(b *testing.B) []*fakeWorker {
	workers := make([]*fakeWorker, 16)
	for i := range workers {
		workers[i] = newFakeWorker(b, "m")
		workers[i].setLoad(int64(i%4), int64(i%3))
	}
	return workers
}

func freeAddr(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// routeChats runs the 1k/8k/32k × cold/multi-turn sub-benchmarks. With
// the router's pid it also reports the router's CPU time per request.
func routeChats(b *testing.B, client routerv1.RouterClient, pid int, httpAddr string) {
	ctx := context.Background()
	for _, kTokens := range []int{1, 8, 32} {
		for _, mode := range []string{"cold", "multi-turn"} {
			b.Run(fmt.Sprintf("%dk/%s", kTokens, mode), func(b *testing.B) {
				// About 4.4 characters per Qwen3 token on this English text.
				chars := kTokens * 1000 * 44 / 10
				history := conversation(chars, "")
				req := &routerv1.RouteRequest{Tenant: "bench", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS}
				lat := make([]time.Duration, 0, 1<<14)
				// One reused body buffer: the client's garbage would
				// otherwise be collected on the router's clock, which a
				// router in its own process does not pay.
				var body []byte
				cpu0 := cpuTime(pid)
				over0, n0 := routeOver2ms(b, httpAddr)
				for i := 0; b.Loop(); i++ {
					if mode == "cold" {
						// Written straight into the buffer: built as
						// strings and quoted each time, a cold body's
						// garbage had the client collecting every 100 ms,
						// its mark phases on the router's cores.
						body = appendColdBody(body[:0], "m", chars, strconv.Itoa(i)+" ")
					} else {
						msgs := append(history[:len(history):len(history)],
							chatMessage{"assistant", "Noted, entry " + strconv.Itoa(i) + "."},
							chatMessage{"user", "Question " + strconv.Itoa(i) + ": who signed the ledger after the storm?"})
						body = appendChatBody(body[:0], "m", msgs)
					}
					req.Body = body
					req.RequestId = "hf-" + strconv.Itoa(i)
					start := time.Now()
					resp, err := client.Route(ctx, req)
					lat = append(lat, time.Since(start))
					if err != nil || resp.GetTarget() == nil {
						b.Fatalf("route: %v %v", resp, err)
					}
				}
				b.StopTimer()
				if cpu := cpuTime(pid) - cpu0; pid != 0 && cpu > 0 {
					b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "router-cpu-µs/op")
				}
				// The router's own account, without the client and the
				// transport: the share of Route handlers over 2 ms (under
				// 1 % means a handler p99 under 2 ms).
				if over, n := routeOver2ms(b, httpAddr); n > n0 {
					b.ReportMetric(100*(over-over0)/(n-n0), "handler-over-2ms-%")
				}
				testkit.ReportPercentiles(b, "", lat)
			})
		}
	}
}

type chatMessage struct{ role, content string }

// conversation is a system prompt and alternating turns of paragraphs
// totalling about chars characters; salt makes every message unique.
func conversation(chars int, salt string) []chatMessage {
	var msgs []chatMessage
	turns(chars, salt, func(role string, content ...string) {
		msgs = append(msgs, chatMessage{role, strings.Join(content, "")})
	})
	return msgs
}

// turns calls f with each message of conversation(chars, salt), its
// content in pieces.
func turns(chars int, salt string, f func(role string, content ...string)) {
	f("system", salt, "You keep a harbour town's archive.")
	n := 0
	for i := 0; n < chars; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		// Paragraphs, as real messages have: their newlines are escapes
		// in the JSON body, which decoders take a slower path for.
		turn := "Turn " + strconv.Itoa(i) + "."
		f(role, salt, turn, paragraphBreak, tokenizer.SampleText, paragraphBreak, tokenizer.SampleText)
		n += len(salt) + len(turn) + 2*len(paragraphBreak) + 2*len(tokenizer.SampleText)
	}
}

const paragraphBreak = "\n\n"

// appendColdBody appends the chat completions body of
// conversation(chars, salt) to dst, quoting each distinct piece once per
// run rather than once per message.
func appendColdBody(dst []byte, model string, chars int, salt string) []byte {
	dst = append(dst, `{"model":`...)
	dst = strconv.AppendQuote(dst, model)
	dst = append(dst, `,"messages":[`...)
	first := true
	turns(chars, salt, func(role string, content ...string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, `{"role":`...)
		dst = strconv.AppendQuote(dst, role)
		dst = append(dst, `,"content":"`...)
		for _, c := range content {
			dst = append(dst, quotedInner(c)...)
		}
		dst = append(dst, `"}`...)
	})
	return append(dst, "]}"...)
}

var quotedPieces sync.Map // string -> its JSON quoting without the quotes

// quotedInner is s quoted for JSON, without the surrounding quotes;
// pieces seen before are not quoted again.
func quotedInner(s string) string {
	if len(s) < 64 {
		q := strconv.Quote(s)
		return q[1 : len(q)-1]
	}
	if q, ok := quotedPieces.Load(s); ok {
		return q.(string)
	}
	q := strconv.Quote(s)
	quotedPieces.Store(s, q[1:len(q)-1])
	return q[1 : len(q)-1]
}

// appendChatBody appends a chat completions body for msgs to dst. Go
// quoting is JSON quoting for the printable ASCII this benchmark writes.
func appendChatBody(dst []byte, model string, msgs []chatMessage) []byte {
	dst = append(dst, `{"model":`...)
	dst = strconv.AppendQuote(dst, model)
	dst = append(dst, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst = strconv.AppendQuote(dst, m.role)
		dst = append(dst, `,"content":`...)
		dst = strconv.AppendQuote(dst, m.content)
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// routeOver2ms reads the router's Route duration histogram: how many
// calls took over 2 ms, and how many there were.
func routeOver2ms(b *testing.B, httpAddr string) (over, count float64) {
	text := metricsAt(b, httpAddr)
	count = metricValue(text, "switchyard_router_route_duration_seconds_count")
	return count - metricValue(text, `switchyard_router_route_duration_seconds_bucket{le="0.002"}`), count
}

// TestColdBody: the benchmark's cold bodies, written piece by piece, are
// the bodies of the conversations they stand for.
func TestColdBody(t *testing.T) {
	for _, salt := range []string{"", "7 ", `q"\` + "\n"} {
		got := appendColdBody(nil, "m", 5000, salt)
		want := appendChatBody(nil, "m", conversation(5000, salt))
		if string(got) != string(want) {
			t.Fatalf("salt %q: body differs:\n%s\nwant\n%s", salt, got, want)
		}
	}
}
