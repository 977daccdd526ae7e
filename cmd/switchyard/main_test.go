package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestUsageAndErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // substring of stdout+stderr
	}{
		{"no args", nil, 2, "Commands:"},
		{"help", []string{"help"}, 0, "dev"},
		{"unknown", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"command help", []string{"router", "-h"}, 0, "SWITCHYARD_SOME_FLAG"},
		{"bad flag", []string{"gateway", "--no-such-flag"}, 2, "flag provided but not defined"},
		{"stray args", []string{"gateway", "extra"}, 2, "unexpected arguments"},
		{"invalid config", []string{"sim", "--block-size", "0"}, 2, "invalid configuration"},
		{"bad log level", []string{"meter", "--log-level", "loud"}, 2, "log level"},
		{"kvtracker without workers", []string{"kvtracker"}, 2, "no workers"},
		{"meter with a bad batch", []string{"meter", "--batch", "0"}, 2, "batch 0: want 1 to 10000"},
		{"version", []string{"version"}, 0, "switchyard "},
		{"--version", []string{"--version"}, 0, runtime.Version()},
		{"version with arguments", []string{"version", "x"}, 2, "unexpected arguments"},
		{"help says how to install completion", []string{"help"}, 0, "source <(switchyard completion bash)"},
		{"completion help", []string{"completion", "-h"}, 0, "~/.config/fish/completions/switchyard.fish"},
		{"completion without a shell", []string{"completion"}, 2, "Usage: switchyard completion bash|zsh|fish"},
		{"completion of an unknown shell", []string{"completion", "tcsh"}, 2, `unknown shell "tcsh"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(context.Background(), tc.args, &out, &out)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out.String())
			}
		})
	}
}

func TestEnvOverridesFlags(t *testing.T) {
	t.Setenv("SWITCHYARD_BLOCK_SIZE", "zero")
	var out bytes.Buffer
	if code := run(context.Background(), []string{"sim"}, &out, &out); code != 2 || !strings.Contains(out.String(), "SWITCHYARD_BLOCK_SIZE") {
		t.Fatalf("code %d, output:\n%s", code, out.String())
	}
}

// syncBuffer lets the test read what the dev command prints while it runs.
type syncBuffer struct {
	ch  chan string
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.buf.Write(p)
	select {
	case s.ch <- s.buf.String():
	default:
	}
	return len(p), nil
}

// TestDevCommand runs `switchyard dev` as a user would, follows the curl it
// prints, and stops it with a cancelled context (what Ctrl-C does).
func TestDevCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{ch: make(chan string, 1)}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"dev",
			"--gateway-addr", freeAddr(t), "--router-grpc-addr", "127.0.0.1:0", "--router-http-addr", "127.0.0.1:0", "--kvtracker-http-addr", "127.0.0.1:0",
			"--meter-http-addr", "127.0.0.1:0", "--policyd-grpc-addr", "127.0.0.1:0", "--policyd-http-addr", "127.0.0.1:0", "--gateway-metrics-addr", "127.0.0.1:0",
			"--sim-port", "0", "--kv-events-config", "", "--time-scale", "20", "--log-level", "warn",
		}, out, io.Discard)
	}()
	urlRE := regexp.MustCompile(`curl -s (http://[0-9.:]+/v1/chat/completions)`)
	var url string
	deadline := time.After(30 * time.Second)
	for url == "" {
		select {
		case s := <-out.ch:
			if m := urlRE.FindStringSubmatch(s); m != nil {
				url = m[1]
			}
		case code := <-done:
			t.Fatalf("dev exited early with %d:\n%s", code, out.buf.String())
		case <-deadline:
			t.Fatalf("dev printed no curl line:\n%s", out.buf.String())
		}
	}
	body := `{"model":"qwen-3.6-27b","messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}`
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"completion_tokens":16`) {
		t.Fatalf("the printed curl got %s: %s", resp.Status, b)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("dev exit code %d after Ctrl-C", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not shut down")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
