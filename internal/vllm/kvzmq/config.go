// Package kvzmq carries vLLM's KV cache events over ZeroMQ, the way vLLM's
// ZmqEventPublisher does, on the pure-Go github.com/go-zeromq/zmq4:
//
//   - a PUB socket sends each batch as three frames: topic, an 8-byte
//     big-endian sequence number (0, 1, 2, ...), and the msgpack payload;
//   - an optional ROUTER socket replays the last buffer_steps batches: a
//     request [identity, "", start seq] is answered with one
//     [identity, "", topic, seq, payload] per buffered batch with
//     seq >= start, then [identity, "", "", -1 as 8 signed bytes, ""]
//     (vLLM #45177, mid-2026, added the topic frame, so a replayed batch
//     is framed as a live one; llm-d-inference-sim answers the same).
//     Before it, replies were [identity, "", seq, payload] and the end
//     [identity, "", -1, ""]: ReplayLegacy. Replay reads both.
//
// Publisher is the engine side (the simulator); Subscriber and Replay are
// the consumer side (kvtracker).
package kvzmq

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// Publisher kinds of vLLM's KVEventsConfig.publisher.
const (
	PublisherNull = "null"
	PublisherZMQ  = "zmq"
)

// Replay reply formats (Config.ReplayFormat): the frames the replay socket
// answers with.
const (
	// ReplayTopic is vLLM's reply since #45177: [identity, "", topic, seq,
	// payload] per batch, then [identity, "", "", END_SEQ, ""].
	ReplayTopic = "topic"
	// ReplayLegacy is the reply of vLLM before #45177: [identity, "", seq,
	// payload] per batch, then [identity, "", END_SEQ, ""].
	ReplayLegacy = "legacy"
)

// Config is vLLM's KVEventsConfig, the JSON given to
// `vllm serve --kv-events-config`, with vLLM's field names and defaults.
type Config struct {
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null". Empty means vLLM's default (None):
	// "zmq" when events are enabled, else "null"; ParseConfig resolves it.
	Publisher string `json:"publisher"`
	// Endpoint of the PUB socket. It binds when the endpoint contains "*"
	// or "::" or is ipc:// or inproc://, and connects otherwise (Binds).
	Endpoint string `json:"endpoint"`
	// ReplayEndpoint is where the ROUTER replay socket binds (always binds,
	// as in vLLM); empty is vLLM's null, no replay.
	ReplayEndpoint string `json:"replay_endpoint"`
	// BufferSteps is how many past batches the replay socket keeps.
	BufferSteps int `json:"buffer_steps"`
	// HWM is the PUB socket's high-water mark; 0 means no limit.
	HWM int `json:"hwm"`
	// MaxQueueSize bounds the batches waiting to be sent.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is the first frame of every message; subscribers filter on
	// its prefix.
	Topic string `json:"topic"`

	// DataParallelRank is not part of vLLM's JSON: vLLM hands it to the
	// publisher, which offsets both endpoints' ports by it
	// (OffsetEndpointPort) and stamps it on batches that carry none.
	DataParallelRank int `json:"-"`
	// BindHost is not part of vLLM's JSON either: when set, a socket that
	// binds on a wildcard host ("tcp://*:5557", which vLLM binds on every
	// interface) binds on this host instead. The simulator sets it to its
	// --host. Whether the PUB socket binds at all is still vLLM's rule,
	// decided on the endpoint as given.
	BindHost string `json:"-"`
	// ReplayFormat is not part of vLLM's JSON: which vLLM's replay replies
	// the publisher imitates, ReplayTopic (also when empty) or
	// ReplayLegacy. The simulator sets it from --kv-replay-format.
	ReplayFormat string `json:"-"`
}

// DefaultConfig is vLLM's KVEventsConfig() with nothing set.
func DefaultConfig() Config {
	return Config{
		Endpoint:     "tcp://*:5557",
		BufferSteps:  10_000,
		HWM:          100_000,
		MaxQueueSize: 100_000,
	}
}

// ParseConfig reads vLLM's --kv-events-config JSON over DefaultConfig,
// rejecting unknown fields, resolves the publisher kind as vLLM does, and
// validates the result.
func ParseConfig(s string) (Config, error) {
	cfg := DefaultConfig()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("parse kv events config: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("parse kv events config: unexpected data after the JSON object")
	}
	if cfg.Publisher == "" {
		cfg.Publisher = PublisherNull
		if cfg.EnableKVCacheEvents {
			cfg.Publisher = PublisherZMQ
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// MarshalJSON writes the vLLM JSON, with an empty ReplayEndpoint or
// Publisher as null.
func (c Config) MarshalJSON() ([]byte, error) {
	type wire struct {
		EnableKVCacheEvents bool    `json:"enable_kv_cache_events"`
		Publisher           *string `json:"publisher"`
		Endpoint            string  `json:"endpoint"`
		ReplayEndpoint      *string `json:"replay_endpoint"`
		BufferSteps         int     `json:"buffer_steps"`
		HWM                 int     `json:"hwm"`
		MaxQueueSize        int     `json:"max_queue_size"`
		Topic               string  `json:"topic"`
	}
	w := wire{
		EnableKVCacheEvents: c.EnableKVCacheEvents,
		Endpoint:            c.Endpoint,
		BufferSteps:         c.BufferSteps,
		HWM:                 c.HWM,
		MaxQueueSize:        c.MaxQueueSize,
		Topic:               c.Topic,
	}
	if c.Publisher != "" {
		w.Publisher = &c.Publisher
	}
	if c.ReplayEndpoint != "" {
		w.ReplayEndpoint = &c.ReplayEndpoint
	}
	return json.Marshal(w)
}

// Enabled reports whether vLLM would start the ZMQ publisher for c.
func (c Config) Enabled() bool {
	return c.EnableKVCacheEvents && (c.Publisher == PublisherZMQ || c.Publisher == "")
}

// Validate checks c. Endpoints are checked only when the ZMQ publisher is
// enabled, as vLLM ignores them otherwise.
func (c Config) Validate() error {
	switch c.Publisher {
	case "", PublisherNull, PublisherZMQ:
	default:
		return fmt.Errorf("kv events config: publisher %q: want %q or %q", c.Publisher, PublisherZMQ, PublisherNull)
	}
	if c.BufferSteps < 0 {
		return fmt.Errorf("kv events config: buffer_steps %d: want >= 0", c.BufferSteps)
	}
	if c.HWM < 0 {
		return fmt.Errorf("kv events config: hwm %d: want >= 0 (0 is no limit)", c.HWM)
	}
	if c.MaxQueueSize < 1 {
		// Python's Queue(maxsize=0) is unbounded; a publisher the engine
		// calls every step must not grow without bound, so refuse it.
		return fmt.Errorf("kv events config: max_queue_size %d: want >= 1", c.MaxQueueSize)
	}
	switch c.ReplayFormat {
	case "", ReplayTopic, ReplayLegacy:
	default:
		return fmt.Errorf("kv events config: replay format %q: want %q (vLLM since #45177) or %q (older vLLM)", c.ReplayFormat, ReplayTopic, ReplayLegacy)
	}
	if c.DataParallelRank < 0 {
		return fmt.Errorf("kv events config: data parallel rank %d: want >= 0", c.DataParallelRank)
	}
	if !c.Enabled() {
		return nil
	}
	if err := checkEndpoint(c.Endpoint); err != nil {
		return fmt.Errorf("kv events config: endpoint: %w", err)
	}
	if c.ReplayEndpoint != "" {
		if err := checkEndpoint(c.ReplayEndpoint); err != nil {
			return fmt.Errorf("kv events config: replay_endpoint: %w", err)
		}
	}
	return nil
}

// checkEndpoint accepts the transports zmq4 implements that vLLM uses.
func checkEndpoint(ep string) error {
	scheme, rest, ok := strings.Cut(ep, "://")
	if !ok || rest == "" {
		return fmt.Errorf("%q: want tcp://host:port, ipc://path or inproc://name", ep)
	}
	switch scheme {
	case "tcp":
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return fmt.Errorf("%q: missing port", ep)
		}
		if port := rest[i+1:]; port != "*" {
			if _, err := strconv.ParseUint(port, 10, 16); err != nil {
				return fmt.Errorf("%q: port %q: want 0-65535 or *", ep, port)
			}
		}
	case "ipc", "inproc":
	default:
		return fmt.Errorf("%q: unsupported transport %q", ep, scheme)
	}
	return nil
}

// Binds is vLLM's heuristic for the PUB socket: bind when the endpoint
// holds a wildcard ("*"), an IPv6 "::" or is ipc/inproc ("bind stable,
// connect volatile"); connect otherwise.
func Binds(endpoint string) bool {
	return strings.Contains(endpoint, "*") ||
		strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") ||
		strings.HasPrefix(endpoint, "inproc://")
}

// onHost moves a wildcard-host TCP endpoint to host; other endpoints, and
// an empty or wildcard host, leave it as it is.
func onHost(endpoint, host string) string {
	port, ok := strings.CutPrefix(endpoint, "tcp://*:")
	if !ok || host == "" || host == "*" {
		return endpoint
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return endpoint
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

// OffsetEndpointPort is vLLM's offset_endpoint_port: data-parallel rank n
// publishes on the base port + n ("tcp://*:5557" → "tcp://*:5559" for
// n=2), inproc endpoints get a "_dp<n>" suffix, and an empty endpoint or
// n=0 is returned unchanged. Like vLLM it refuses other transports when
// n > 0.
func OffsetEndpointPort(endpoint string, n int) (string, error) {
	if n < 0 {
		return "", fmt.Errorf("offset endpoint %q: negative rank %d", endpoint, n)
	}
	if endpoint == "" || n == 0 {
		return endpoint, nil
	}
	if strings.Contains(endpoint, "inproc") {
		return endpoint + "_dp" + strconv.Itoa(n), nil
	}
	if !strings.Contains(endpoint, "tcp") {
		return "", fmt.Errorf("offset endpoint %q: must contain 'inproc' or 'tcp'", endpoint)
	}
	i := strings.LastIndexByte(endpoint, ':')
	if i < 0 {
		return endpoint, nil
	}
	port, err := strconv.Atoi(endpoint[i+1:])
	if err != nil {
		return "", fmt.Errorf("offset endpoint %q: port: %w", endpoint, err)
	}
	return endpoint[:i+1] + strconv.Itoa(port+n), nil
}
