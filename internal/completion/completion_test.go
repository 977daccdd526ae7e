package completion_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/completion"
	"github.com/switchyard-dev/switchyard/internal/completion/completiontest"
)

// listFlag is a custom flag.Value, as the programs' repeatable -f flags are.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// testProgram has what real programs have: one-letter and long flags,
// bool and valued ones, a custom Value, quotes and brackets in usage, and
// a command with positional words.
func testProgram() completion.Program {
	top := flag.NewFlagSet("prog", flag.ContinueOnError)
	top.Bool("version", false, "print the version")
	serve := flag.NewFlagSet("prog serve", flag.ContinueOnError)
	serve.String("http-addr", "127.0.0.1:9091", "HTTP listen address (REST [v1], /metrics)")
	serve.Duration("timeout", time.Second, "the server's `deadline`: don't wait longer")
	serve.Bool("pprof", false, `serve "profiles" \ debug`)
	check := flag.NewFlagSet("prog check", flag.ContinueOnError)
	check.Var(new(listFlag), "f", "file or directory (repeatable)")
	check.Bool("strict", false, "treat warnings as errors")
	return completion.Program{Name: "prog", Flags: top, Commands: []completion.Command{
		{Name: "serve", Summary: "serve things: fast [really]", Flags: serve},
		{Name: "check", Summary: "check files", Flags: check},
		{Name: "version", Summary: "print the version"},
		{Name: "completion", Summary: "print a completion script", Flags: flag.NewFlagSet("prog completion", flag.ContinueOnError), Args: completion.Shells},
	}}
}

func script(t *testing.T, shell string, p completion.Program) string {
	t.Helper()
	var b bytes.Buffer
	if err := completion.Write(&b, shell, p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteUnknownShell(t *testing.T) {
	if err := completion.Write(new(bytes.Buffer), "tcsh", testProgram()); err == nil || !strings.Contains(err.Error(), "tcsh") {
		t.Fatalf("err = %v", err)
	}
}

// TestScriptsNameEverything checks every script offers every command and
// every flag, and that each shell that is installed parses it.
func TestScriptsNameEverything(t *testing.T) {
	p := testProgram()
	for _, shell := range completion.Shells {
		t.Run(shell, func(t *testing.T) {
			s := script(t, shell, p)
			want := []string{"version", "completion", "serve", "check", "http-addr", "timeout", "pprof", "strict", "bash zsh fish"}
			for _, w := range want {
				if !strings.Contains(s, w) {
					t.Errorf("script lacks %q", w)
				}
			}
			completiontest.SyntaxCheck(t, shell, s)
		})
	}
}

// TestBashCompletes drives the generated function as bash's completion
// does, through COMP_WORDS and COMP_CWORD, in a real bash.
func TestBashCompletes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := script(t, "bash", testProgram())
	tests := []struct {
		words []string // the last is the word being completed
		want  []string
	}{
		{[]string{"prog", ""}, []string{"serve", "check", "version", "completion"}},
		{[]string{"prog", "se"}, []string{"serve"}},
		{[]string{"prog", "-"}, []string{"--version"}},
		{[]string{"prog", "serve", "--"}, []string{"--http-addr", "--pprof", "--timeout"}},
		{[]string{"prog", "serve", "--p"}, []string{"--pprof"}},
		{[]string{"prog", "check", "-"}, []string{"-f", "--strict"}},
		{[]string{"prog", "check", "-f", "pol"}, []string{"policies.yaml"}},
		{[]string{"prog", "check", "--f", "="}, []string{"policies.yaml"}},
		{[]string{"prog", "check", "--f", "=", "po"}, []string{"policies.yaml"}},
		{[]string{"prog", "check", "--strict", "po"}, nil}, // a bool flag takes no value, check no arguments
		{[]string{"prog", "completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"prog", "completion", "z"}, []string{"zsh"}},
		{[]string{"prog", "nope", "--"}, nil},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			got := completiontest.Bash(t, s, dir, tc.words...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFishCompletes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := script(t, "fish", testProgram())
	tests := []struct {
		line string
		want []string // fish sorts them
	}{
		{"prog ", []string{"check", "completion", "serve", "version"}},
		{"prog se", []string{"serve"}},
		{"prog -", []string{"--version"}},
		{"prog serve --", []string{"--http-addr", "--pprof", "--timeout"}},
		{"prog check -", []string{"-f", "--strict"}},
		{"prog check -f pol", []string{"policies.yaml"}},
		{"prog serve --http-addr=po", []string{"--http-addr=policies.yaml"}},
		{"prog check --strict po", nil},
		{"prog completion ", []string{"bash", "fish", "zsh"}},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			if got := completiontest.Fish(t, s, dir, tc.line); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
