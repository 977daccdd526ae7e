package kvzmq

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	def := DefaultConfig()
	tests := []struct {
		name    string
		in      string
		want    func(c *Config)
		wantErr string
	}{
		{name: "empty object is vLLM's default, publisher null", in: `{}`, want: func(c *Config) { c.Publisher = PublisherNull }},
		{name: "enabled resolves publisher to zmq", in: `{"enable_kv_cache_events": true}`, want: func(c *Config) {
			c.EnableKVCacheEvents, c.Publisher = true, PublisherZMQ
		}},
		{name: "explicit null publisher stays off", in: `{"enable_kv_cache_events": true, "publisher": "null"}`, want: func(c *Config) {
			c.EnableKVCacheEvents, c.Publisher = true, PublisherNull
		}},
		{name: "publisher null JSON resolves", in: `{"enable_kv_cache_events": true, "publisher": null, "replay_endpoint": null}`, want: func(c *Config) {
			c.EnableKVCacheEvents, c.Publisher = true, PublisherZMQ
		}},
		{
			name: "every field",
			in: `{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://10.0.0.5:6000",
				"replay_endpoint": "tcp://*:6001", "buffer_steps": 50, "hwm": 0, "max_queue_size": 7, "topic": "kv@pod-1"}`,
			want: func(c *Config) {
				*c = Config{EnableKVCacheEvents: true, Publisher: PublisherZMQ, Endpoint: "tcp://10.0.0.5:6000",
					ReplayEndpoint: "tcp://*:6001", BufferSteps: 50, HWM: 0, MaxQueueSize: 7, Topic: "kv@pod-1"}
			},
		},
		{name: "unknown field named", in: `{"enable_kv_cache_events": true, "replay_endpoints": "tcp://*:1"}`, wantErr: `unknown field "replay_endpoints"`},
		{name: "unknown publisher", in: `{"enable_kv_cache_events": true, "publisher": "kafka"}`, wantErr: `publisher "kafka"`},
		{name: "wrong type", in: `{"buffer_steps": "10"}`, wantErr: "buffer_steps"},
		{name: "trailing data", in: `{} {}`, wantErr: "unexpected data after the JSON object"},
		{name: "not JSON", in: `enable_kv_cache_events=true`, wantErr: "parse kv events config"},
		{name: "unbounded queue refused", in: `{"max_queue_size": 0}`, wantErr: "max_queue_size 0"},
		{name: "negative buffer", in: `{"buffer_steps": -1}`, wantErr: "buffer_steps -1"},
		{name: "bad endpoint when enabled", in: `{"enable_kv_cache_events": true, "endpoint": "tcp://host"}`, wantErr: "missing port"},
		{name: "bad port", in: `{"enable_kv_cache_events": true, "endpoint": "tcp://*:99999"}`, wantErr: `port "99999"`},
		{name: "unsupported transport", in: `{"enable_kv_cache_events": true, "endpoint": "pgm://eth0;239.0.0.1:5555"}`, wantErr: `unsupported transport "pgm"`},
		{name: "bad replay endpoint", in: `{"enable_kv_cache_events": true, "replay_endpoint": "5558"}`, wantErr: "replay_endpoint"},
		{name: "endpoint ignored while disabled", in: `{"endpoint": "nonsense"}`, want: func(c *Config) { c.Publisher, c.Endpoint = PublisherNull, "nonsense" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			want := def
			tt.want(&want)
			if got != want {
				t.Fatalf("ParseConfig =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

func TestConfigMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "defaults write nulls where vLLM has None",
			in:   `{"enable_kv_cache_events": true}`,
			want: `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":null,"buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":""}`,
		},
		{
			name: "replay endpoint",
			in:   `{"enable_kv_cache_events": true, "replay_endpoint": "tcp://*:5558", "topic": "kv@w1"}`,
			want: `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:5557","replay_endpoint":"tcp://*:5558","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":"kv@w1"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("Marshal =\n %s\nwant\n %s", b, tt.want)
			}
			back, err := ParseConfig(string(b))
			if err != nil || back != c {
				t.Fatalf("ParseConfig(Marshal(c)) = %+v, %v; want %+v", back, err, c)
			}
		})
	}
}

func TestOffsetEndpointPort(t *testing.T) {
	tests := []struct {
		endpoint string
		n        int
		want     string
		wantErr  string
	}{
		{"tcp://*:5557", 0, "tcp://*:5557", ""},
		{"tcp://*:5557", 2, "tcp://*:5559", ""},
		{"tcp://10.0.0.5:5557", 1, "tcp://10.0.0.5:5558", ""},
		{"tcp://[::1]:5557", 3, "tcp://[::1]:5560", ""},
		{"inproc://cache", 1, "inproc://cache_dp1", ""},
		{"", 4, "", ""},
		{"ipc:///tmp/kv.sock", 0, "ipc:///tmp/kv.sock", ""},
		{"ipc:///tmp/kv.sock", 1, "", "must contain 'inproc' or 'tcp'"},
		{"tcp://*:*", 1, "", "port"},
		{"tcp://*:5557", -1, "", "negative rank"},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			got, err := OffsetEndpointPort(tt.endpoint, tt.n)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("OffsetEndpointPort(%q, %d) error = %v, want %q", tt.endpoint, tt.n, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("OffsetEndpointPort(%q, %d) = %q, %v; want %q", tt.endpoint, tt.n, got, err, tt.want)
			}
		})
	}
}

func TestBinds(t *testing.T) {
	tests := []struct {
		endpoint string
		want     bool
	}{
		{"tcp://*:5557", true},
		{"tcp://127.0.0.1:*", true},
		{"tcp://[::]:5557", true},
		{"ipc:///tmp/kv.sock", true},
		{"inproc://kv", true},
		{"tcp://127.0.0.1:5557", false},
		{"tcp://kvtracker.switchyard.svc:5557", false},
	}
	for _, tt := range tests {
		if got := Binds(tt.endpoint); got != tt.want {
			t.Errorf("Binds(%q) = %v, want %v", tt.endpoint, got, tt.want)
		}
	}
}

// FuzzParseConfig: no panic on any input; an accepted config survives
// Marshal → ParseConfig unchanged, and its endpoints offset without panic.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "buffer_steps": 1, "hwm": 2, "max_queue_size": 3, "topic": "t"}`,
		`{"enable_kv_cache_events": true, "endpoint": "inproc://x"}`,
		`{"publisher": null}`,
	} {
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, s string, rank int) {
		c, err := ParseConfig(s)
		if err != nil {
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
		back, err := ParseConfig(string(b))
		if err != nil || back != c {
			t.Fatalf("round trip of %s: %+v, %v; want %+v", b, back, err, c)
		}
		_, _ = OffsetEndpointPort(c.Endpoint, rank)
		_, _ = OffsetEndpointPort(c.ReplayEndpoint, rank)
	})
}
