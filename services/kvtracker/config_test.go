package kvtracker

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "workers.yaml")
	if err := os.WriteFile(file, []byte("- {id: f0, kvEndpoint: 'tcp://h:5557', model: m}\n- {id: w0, kvEndpoint: 'tcp://h:5558', model: m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := func() Config {
		c := DefaultConfig()
		c.ReplicaID = "r"
		c.Model = "m"
		c.Workers = "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558"
		return c
	}
	tests := []struct {
		name    string
		mod     func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"no workers", func(c *Config) { c.Workers = "" }, "no workers"},
		{"file", func(c *Config) { c.Workers, c.WorkersFile = "", file }, ""},
		{"file and shorthand collide", func(c *Config) { c.WorkersFile = file }, `duplicate id "w0"`},
		{"policyd alone", func(c *Config) { c.Workers, c.PolicydAddr = "", "127.0.0.1:9092" }, ""},
		{"policyd and static workers", func(c *Config) { c.PolicydAddr = "policyd:9092" }, ""},
		{"bad policyd addr", func(c *Config) { c.PolicydAddr = "policyd" }, "policyd-addr"},
		{"one line for router and kvtracker", func(c *Config) {
			c.Workers = "w0=http://10.0.0.5:8000|tcp://10.0.0.5:5557|tcp://10.0.0.5:5558"
		}, ""},
		{"a router's line without KV endpoint", func(c *Config) { c.Workers = "w0=http://10.0.0.5:8000" }, "--bind"},
		{"no model", func(c *Config) { c.Model = "" }, "no model"},
		{"bad endpoint with its entry", func(c *Config) { c.Workers = "w0=tcp://*:5557" }, `workers: entry 1: kvEndpoint: "tcp://*:5557": host "*" cannot be dialled`},
		{"bound topic twice", func(c *Config) {
			c.Workers, c.Bind, c.WorkerSpecs = "", "tcp://*:5557", []WorkerSpec{{ID: "a", Topic: "t"}, {ID: "b", Topic: "t"}}
		}, "same topic"},
		{"missing file", func(c *Config) { c.WorkersFile = "/nonexistent/w.yaml" }, "workers-file"},
		{"specs in code", func(c *Config) { c.Workers, c.WorkerSpecs = "", []WorkerSpec{{ID: "x", KVEndpoint: "tcp://h:1"}} }, ""},
		{"bound worker needs --bind", func(c *Config) { c.Workers = "w0=" }, "--bind"},
		{"bound worker with --bind", func(c *Config) { c.Workers, c.Bind = "w0=", "tcp://*:5557" }, ""},
		{"bad bind", func(c *Config) { c.Bind = "udp://x" }, "bind"},
		{"no nats", func(c *Config) { c.NATS.URL = "" }, "nats-url: required"},
		{"bad nats scheme", func(c *Config) { c.NATS.URL = "http://h:4222" }, "nats-url"},
		{"redis optional", func(c *Config) { c.Redis.URL = "" }, ""},
		{"bad redis", func(c *Config) { c.Redis.URL = "http://u:secret@h" }, "redis-url"},
		{"no replica id", func(c *Config) { c.ReplicaID = " " }, "replica-id"},
		{"bad http addr", func(c *Config) { c.HTTPAddr = "nope" }, "http-addr"},
		{"zero interval", func(c *Config) { c.SnapshotInterval = 0 }, "snapshot-interval"},
		{"negative timeout", func(c *Config) { c.ReplayTimeout = -time.Second }, "replay-timeout"},
		{"restart check off", func(c *Config) { c.RestartCheckInterval = 0 }, ""},
		{"negative restart check", func(c *Config) { c.RestartCheckInterval = -time.Second }, "restart-check-interval"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error leaks a password: %v", err)
			}
		})
	}
}

func TestRegisterFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("kvtracker", flag.ContinueOnError)
	c.RegisterFlags(fs)
	err := fs.Parse([]string{"--workers", "w0=tcp://h:1", "--model", "m", "--replica-id", "r",
		"--snapshot-interval", "3s", "--bind", "tcp://*:5557", "--redis-url", ""})
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotInterval != 3*time.Second || c.Bind != "tcp://*:5557" || c.Redis.URL != "" || c.SummaryInterval != DefaultConfig().SummaryInterval {
		t.Errorf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
