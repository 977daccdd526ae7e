package hf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPieceDA builds the Unigram trie of the largest fixture vocabularies
// (Gemma 3's 262k strings, Qwen3's 151k): every piece is found with its id,
// in bounded time and space.
func TestPieceDA(t *testing.T) {
	for _, m := range []string{"gemma3", "qwen3", "llama2"} {
		data, err := os.ReadFile(filepath.Join(fixtureDir(t, m), "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Model struct{ Vocab map[string]uint32 } `json:"model"`
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		tr := newPieceTrie(f.Model.Vocab)
		da := newPieceDA(&tr, nil)
		took := time.Since(start)
		t.Logf("%s: %d pieces, %d trie nodes, %d slots, %v", m, len(f.Model.Vocab), len(tr.nodes), len(da.slots), took)
		if len(da.slots) > 3*len(tr.nodes)+1024 {
			t.Errorf("%s: %d slots for %d nodes", m, len(da.slots), len(tr.nodes))
		}
		for p, id := range f.Model.Vocab {
			if got, ok := da.get(p); p != "" && (!ok || got != id) {
				t.Fatalf("%s: get(%q) = %d, %v; want %d", m, p, got, ok, id)
			}
		}
		if _, ok := da.get("\xff\xfe definitely not a piece"); ok {
			t.Errorf("%s: found a string that is no piece", m)
		}
	}
}
