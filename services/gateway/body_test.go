package gateway

import (
	"bufio"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

// trickle opens a connection, sends head, then body a byte every gap until
// the body is sent or the connection fails; it returns the connection.
func trickle(t *testing.T, addr, head, body string, gap time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range len(body) {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(gap)
		}
	}()
	return c
}

// TestSlowBodyAnswered408: a body that trickles past --body-read-timeout
// is answered 408 in the API's shape and its connection closed, although
// the client goes on sending (before, it got no answer, was counted as a
// client that left, and the server kept reading the trickle).
func TestSlowBodyAnswered408(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.BodyReadTimeout = 300 * time.Millisecond }})
	addr := strings.TrimPrefix(e.url, "http://")
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		t.Run(strings.TrimPrefix(path, "/v1/"), func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 4096) + `"}]}`
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, len(body))
			c := trickle(t, addr, head, body, 20*time.Millisecond)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(c)
			status, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if !strings.HasPrefix(status, "HTTP/1.1 408") {
				t.Fatalf("status %q, want 408", status)
			}
			rest := new(strings.Builder)
			buf := make([]byte, 4096)
			for {
				n, err := r.Read(buf)
				rest.Write(buf[:n])
				if err != nil {
					break // closed by the gateway (EOF), before the read deadline
				}
			}
			if !strings.Contains(rest.String(), "--body-read-timeout") {
				t.Errorf("answer does not say why:\n%s", rest)
			}
			if !strings.Contains(strings.ToLower(rest.String()), "connection: close") {
				t.Errorf("answer does not close the connection:\n%s", rest)
			}
		})
	}
}

// TestDeclaredBodySizeIsNotAllocated: clients that declare a body just
// under the limit and send nothing more cost the gateway what they sent,
// not what they declared (before: 8 MiB each, at once).
func TestDeclaredBodySizeIsNotAllocated(t *testing.T) {
	const limit, clients = 8 << 20, 32
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.MaxBodyBytes = limit; c.BodyReadTimeout = time.Minute }})
	addr := strings.TrimPrefix(e.url, "http://")
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before, goroutines := heap(), runtime.NumGoroutine()
	for range clients {
		head := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", limit-1)
		trickle(t, addr, head, `{"model":"`, time.Second)
	}
	// A connection's goroutine reads its headers and goes straight on to
	// the body; give the last ones a moment past their accept.
	e.eventually(t, "a goroutine for every slow body", func() bool { return runtime.NumGoroutine() >= goroutines+clients })
	time.Sleep(300 * time.Millisecond)
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("heap in use %d MiB → %d MiB with %d bodies of %d MiB declared", before>>20, after>>20, clients, limit>>20)
	if grown > clients*limit/4 {
		t.Errorf("heap grew %d MiB for %d bodies that sent 10 bytes each", grown>>20, clients)
	}
}
