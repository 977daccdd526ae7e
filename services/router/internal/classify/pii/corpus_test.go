package pii

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateTable = flag.Bool("update-table", false, "write the accuracy table to ACCURACY.md")

// corpusFiles are the labelled examples: kinds TAB text, one a line.
var corpusFiles = []string{"testdata/corpus.tsv", "testdata/handwritten.tsv"}

type example struct {
	file string
	line int
	want Kinds
	text string
}

func loadCorpus(t testing.TB) []example {
	t.Helper()
	var out []example
	for _, f := range corpusFiles {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			labels, text, ok := strings.Cut(l, "\t")
			if !ok {
				t.Fatalf("%s:%d: no tab", f, n)
			}
			var want Kinds
			if labels != "-" {
				for _, name := range strings.Split(labels, ",") {
					k := slices.Index(kindNames[:], name)
					if k < 0 {
						t.Fatalf("%s:%d: unknown kind %q", f, n, name)
					}
					want |= 1 << Kind(k)
				}
			}
			out = append(out, example{f, n, want, strings.ReplaceAll(text, `\n`, "\n")})
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

type score struct{ tp, fp, fn, pos int }

func (s score) precision() float64 {
	if s.tp+s.fp == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fp)
}

func (s score) recall() float64 {
	if s.tp+s.fn == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fn)
}

func (s score) f1() float64 {
	p, r := s.precision(), s.recall()
	if p+r == 0 {
		return 0
	}
	return 2 * p * r / (p + r)
}

// checkDigitKinds are held to recall and precision of at least 0.95.
var checkDigitKinds = []Kind{Card, MyNumber, IBAN}

// TestCorpus measures precision and recall per kind over the labelled
// corpus and fails below the targets; -v prints the table, -update-table
// writes it to ACCURACY.md.
func TestCorpus(t *testing.T) {
	exs := loadCorpus(t)
	var scores [numKinds]score
	negatives := 0
	for _, ex := range exs {
		got := Scan(ex.text, 0)
		if ex.want == 0 {
			negatives++
		}
		for k := range numKinds {
			w, g := ex.want.Has(k), got.Has(k)
			s := &scores[k]
			if w {
				s.pos++
			}
			switch {
			case w && g:
				s.tp++
			case g:
				s.fp++
				t.Logf("%s:%d: false %s: %s", ex.file, ex.line, k, ex.text)
			case w:
				s.fn++
				t.Logf("%s:%d: missed %s: %s", ex.file, ex.line, k, ex.text)
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| kind | positives | TP | FP | FN | precision | recall | F1 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for k := range numKinds {
		s := scores[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %.3f | %.3f | %.3f |\n", k, s.pos, s.tp, s.fp, s.fn, s.precision(), s.recall(), s.f1())
	}
	table := b.String()
	summary := fmt.Sprintf("%d examples (%d without personal data), from %s.\n", len(exs), negatives, strings.Join(corpusFiles, " and "))
	t.Logf("\n%s\n%s", summary, table)
	if *updateTable {
		doc := "# pii classifier accuracy\n\n" +
			"Measured by `go test -run TestCorpus -update-table` over the labelled corpus: " + summary +
			"A false positive is a kind reported for an example not labelled with it, a false negative a label not reported.\n\n" + table +
			"\nRead these numbers for what they are: the corpus is synthetic (corpusgen_test.go's templates, plus hand-written lines) and was " +
			"written by the classifier's author alongside it, so it measures the formats the classifier was built for, in-sample; " +
			"formats it does not know (other countries' national phone formats, values split across lines, digits spelled out) " +
			"are not in it. Regenerate the table with `go test -run TestCorpus -update-table ./services/router/internal/classify/pii/`.\n"
		if err := os.WriteFile("ACCURACY.md", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range checkDigitKinds {
		if s := scores[k]; s.pos < 40 || s.recall() < 0.95 || s.precision() < 0.95 {
			t.Errorf("%s: %d positives, precision %.3f, recall %.3f: want 40 or more, both 0.95 or more", k, s.pos, s.precision(), s.recall())
		}
	}
	for k := range numKinds {
		if s := scores[k]; s.pos < 40 {
			t.Errorf("%s: only %d positives in the corpus", k, s.pos)
		}
	}
}
