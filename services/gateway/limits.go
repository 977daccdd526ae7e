package gateway

import (
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/switchyard-dev/switchyard/internal/openaiapi"
)

// Per-client concurrency. A client holding many long generations (200
// connections asking for 2,000 tokens each) fills the workers' batches and
// queues, and every other client's first token waits behind them. Capping
// the completion requests one client has in flight
// (Config.MaxStreamsPerClient) bounds its share; the request over the cap
// is answered 429 at once, before its body is read or anything is routed,
// with Retry-After, which the OpenAI SDKs honour when they retry.
//
// Both streamed and non-streamed requests count: a non-streamed answer
// holds its worker as long as a stream does. The client is its IP address
// (the connection's peer) until tenants are authenticated; then the key
// becomes the tenant.
const limitRetryAfter = 1 // seconds

// clientLimiter counts the requests in flight per client.
type clientLimiter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newClientLimiter(max int) *clientLimiter {
	if max <= 0 {
		return nil
	}
	return &clientLimiter{max: max, n: map[string]int{}}
}

// acquire takes a slot for key; false when key has max in flight.
func (l *clientLimiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] >= l.max {
		return false
	}
	l.n[key]++
	return true
}

func (l *clientLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[key] <= 1 {
		delete(l.n, key) // the map holds only clients with requests in flight
		return
	}
	l.n[key]--
}

// clientKey is the client a request counts against: its peer's IP.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (g *Gateway) tooManyStreams(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(limitRetryAfter))
	openaiapi.WriteError(w, &openaiapi.APIError{
		Status:  http.StatusTooManyRequests,
		Type:    openaiapi.ErrTypeRateLimit,
		Message: "too many concurrent requests from this client (at most " + strconv.Itoa(g.limiter.max) + "); retry when one finishes",
		Code:    "too_many_concurrent_requests",
	})
}
