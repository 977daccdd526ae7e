package main

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/completion"
	"github.com/switchyard-dev/switchyard/internal/completion/completiontest"
)

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"completion", shell}, &out, &errOut); code != 0 {
		t.Fatalf("completion %s: exit %d: %s", shell, code, errOut.String())
	}
	return out.String()
}

// TestCompletionScripts checks each script names every command and parses
// in its shell (a loud skip where that shell is not installed).
func TestCompletionScripts(t *testing.T) {
	var names []string
	for _, c := range commands(io.Discard) {
		names = append(names, c.name)
	}
	for _, c := range builtins {
		names = append(names, c.Name)
	}
	for _, shell := range completion.Shells {
		t.Run(shell, func(t *testing.T) {
			s := completionScript(t, shell)
			for _, name := range append(names, "replica-id", "log-level") {
				if !strings.Contains(s, name) {
					t.Errorf("the %s script lacks %q", shell, name)
				}
			}
			completiontest.SyntaxCheck(t, shell, s)
		})
	}
}

// TestCompletes completes commands and their flags as a user's shell
// would, with the script the binary prints.
func TestCompletes(t *testing.T) {
	tests := []struct {
		line string // the last word is being completed
		want []string
	}{
		{"switchyard kv", []string{"kvtracker"}},
		{"switchyard ver", []string{"version"}},
		{"switchyard --ver", []string{"--version"}},
		{"switchyard kvtracker --repli", []string{"--replica-id"}},
		{"switchyard router --grpc", []string{"--grpc-addr", "--grpc-tls-cert", "--grpc-tls-client-ca", "--grpc-tls-key"}},
		{"switchyard dev --log-f", []string{"--log-format"}},
		{"switchyard sim --enable-p", []string{"--enable-prompt-tokens-details"}},
		{"switchyard completion z", []string{"zsh"}},
	}
	bash, fish := completionScript(t, "bash"), completionScript(t, "fish")
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			if got := completiontest.Bash(t, bash, t.TempDir(), strings.Split(tc.line, " ")...); !slices.Equal(got, tc.want) {
				t.Errorf("bash: got %q, want %q", got, tc.want)
			}
			if got := completiontest.Fish(t, fish, t.TempDir(), tc.line); !slices.Equal(got, tc.want) {
				t.Errorf("fish: got %q, want %q", got, tc.want)
			}
		})
	}
}
