package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/completion"
	"github.com/switchyard-dev/switchyard/internal/completion/completiontest"
	"github.com/switchyard-dev/switchyard/internal/flaghelp"
)

// TestCommandFlags reads every command's flags through the probe: a
// command that does not call parse() first would run instead.
func TestCommandFlags(t *testing.T) {
	for _, c := range commands() {
		fs, err := commandFlags(context.Background(), c)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		// Usage strings must not state a default that -h prints anyway.
		for _, bad := range flaghelp.RepeatedDefaults(fs) {
			t.Errorf("yardctl %s %s\n\tsays default twice: drop it from the usage string, the flag package prints it", c.name, bad)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	if code, _, errOut := runCLI(t, "", "completion"); code != 2 || !strings.Contains(errOut, "Usage: yardctl completion bash|zsh|fish") {
		t.Errorf("completion without a shell: %d %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "completion", "tcsh"); code == 0 || !strings.Contains(errOut, `unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: %d %q", code, errOut)
	}
	if code, out, _ := runCLI(t, "", "help"); code != 0 || !strings.Contains(out, "source <(yardctl completion bash)") {
		t.Errorf("help does not say how to install completion: %q", out)
	}
	for _, shell := range completion.Shells {
		t.Run(shell, func(t *testing.T) {
			code, s, errOut := runCLI(t, "", "completion", shell)
			if code != 0 {
				t.Fatalf("completion %s: %d %s", shell, code, errOut)
			}
			for _, c := range commands() {
				if !strings.Contains(s, c.name) {
					t.Errorf("the %s script lacks %q", shell, c.name)
				}
			}
			completiontest.SyntaxCheck(t, shell, s)
		})
	}
}

// TestCompletes completes commands and their flags as a user's shell
// would, with the script yardctl prints.
func TestCompletes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string // the last word is being completed
		want []string
	}{
		{"yardctl val", []string{"validate"}},
		{"yardctl validate --st", []string{"--strict"}},
		{"yardctl validate -f pol", []string{"policies.yaml"}},
		{"yardctl explain --sta", []string{"--state"}},  // offline explain's flags
		{"yardctl explain --rou", []string{"--router"}}, // and the online one's
		{"yardctl tokenize --cha", []string{"--chat"}},
		{"yardctl tokenize --che", []string{"--check-against"}},
		{"yardctl completion f", []string{"fish"}},
	}
	_, bash, _ := runCLI(t, "", "completion", "bash")
	_, fish, _ := runCLI(t, "", "completion", "fish")
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			if got := completiontest.Bash(t, bash, dir, strings.Split(tc.line, " ")...); !slices.Equal(got, tc.want) {
				t.Errorf("bash: got %q, want %q", got, tc.want)
			}
			if got := completiontest.Fish(t, fish, dir, tc.line); !slices.Equal(got, tc.want) {
				t.Errorf("fish: got %q, want %q", got, tc.want)
			}
		})
	}
}
