package policy

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestBrokenGolden compiles each broken policy with the dev catalog and
// compares every diagnostic with testdata/broken/NAME.golden. Run with
// -update to accept new output.
func TestBrokenGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/broken/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no broken policies: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, diags, err := Load(append(catalogFiles, f)...)
			if err != nil {
				t.Fatal(err)
			}
			if s != nil || !diags.HasErrors() {
				t.Fatalf("compiled without errors:\n%s", diags.Error())
			}
			got := diags.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestBrokenGolden -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// The message the issue gives as the example of a located error.
func TestObjectiveTypoMessage(t *testing.T) {
	_, diags, err := Load(append(catalogFiles, "testdata/broken/objective-typo.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	want := `testdata/broken/objective-typo.yaml:16:37: InferencePolicy typo: spec.rules[1].route.select[1].minimize: unknown objective "PredictedTTTF" (did you mean PredictedTTFT?)`
	if len(diags) != 1 || diags[0].String() != want {
		t.Errorf("got\n%s\nwant\n%s", diags.Error(), want)
	}
}
