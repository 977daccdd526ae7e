// Package completiontest runs generated completion scripts in real shells,
// for the tests of the programs that generate them.
package completiontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// syntaxCheck is each shell's parse-only command line.
var syntaxCheck = map[string][]string{
	"bash": {"bash", "-n"},
	"zsh":  {"zsh", "-n"},
	"fish": {"fish", "--no-execute"},
}

// SyntaxCheck has shell parse script without running it. A shell that is
// not installed is a loud skip, not a pass.
func SyntaxCheck(t testing.TB, shell, script string) {
	t.Helper()
	argv := syntaxCheck[shell]
	if argv == nil {
		t.Fatalf("no syntax check for shell %q", shell)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Skipf("SKIP: %s is not installed, so its completion script is not syntax-checked", argv[0])
	}
	path := writeScript(t, shell, script)
	if out, err := exec.Command(argv[0], append(argv[1:], path)...).CombinedOutput(); err != nil {
		t.Fatalf("%s rejects the script: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// bashDriver loads the script, finds the function registered for the
// program (complete -p, as bash does), sets what bash sets before calling
// it, and prints COMPREPLY one word a line.
const bashDriver = `source "$1" || exit 3
shift
spec=$(complete -p -- "$1") || exit 4
fn=${spec#*-F }
fn=${fn%% *}
COMP_WORDS=("$@")
COMP_CWORD=$(( $# - 1 ))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`

// Bash completes the command line words (the program, then the words
// typed; the last is the one being completed, "" for a fresh one) with the
// bash script, run in dir, and returns the candidates.
func Bash(t testing.TB, script, dir string, words ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("SKIP: bash is not installed")
	}
	if len(words) < 2 {
		t.Fatal("Bash needs the program and the word being completed")
	}
	cmd := exec.Command("bash", append([]string{"-c", bashDriver, "driver", writeScript(t, "bash", script)}, words...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", words, err, out)
	}
	return lines(out)
}

func lines(out []byte) []string {
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" {
			got = append(got, l)
		}
	}
	return got
}

func writeScript(t testing.TB, shell, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "completion."+shell)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Fish completes line (what was typed, cursor at the end) with the fish
// script, run in dir, and returns the candidates without descriptions.
// Without fish it is a loud skip.
func Fish(t testing.TB, script, dir, line string) []string {
	t.Helper()
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("SKIP: fish is not installed, so its completion is not exercised")
	}
	cmd := exec.Command("fish", "--no-config", "-c", "source $argv[1]; and complete -C $argv[2]", writeScript(t, "fish", script), line)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish completion of %q: %v\n%s", line, err, out)
	}
	got := lines(out)
	for i, l := range got {
		got[i], _, _ = strings.Cut(l, "\t")
	}
	return got
}
