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
