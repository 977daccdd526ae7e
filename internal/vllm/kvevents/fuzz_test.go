package kvevents

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode feeds arbitrary payloads to the decoder: it must never panic,
// must fail with a *DecodeError, and whatever it accepts must survive
// encode→decode unchanged in both encodings.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.bin"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var d Decoder
		var b Batch
		if err := d.Decode(payload, &b); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error is %T, want *DecodeError: %v", err, err)
			}
			return
		}
		for _, enc := range []Encoding{EncodingArray, EncodingMap} {
			p, err := AppendEncode(nil, &b, enc)
			if err != nil {
				t.Fatalf("encode %s what the decoder accepted: %v", enc, err)
			}
			var d2 Decoder
			var back Batch
			if err := d2.Decode(p, &back); err != nil {
				t.Fatalf("decode %s re-encoding: %v", enc, err)
			}
			if diff := diffBatch(&b, &back); diff != "" {
				t.Fatalf("%s round trip: %s", enc, diff)
			}
		}
	})
}
