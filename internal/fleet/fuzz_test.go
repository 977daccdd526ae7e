package fleet

import (
	"testing"
)

var fuzzSeeds = []string{
	"sim-0=http://127.0.0.1:8001,sim-1=http://127.0.0.1:8002",
	"a=https://x/y/,",
	"w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558,w1=tcp://h:5557",
	"w0=,w1=",
	"s=http://h:1|tcp://h:2|tcp://h:3",
	"a=tcp://[::1]:80",
	"- id: a\n  url: http://x\n  models: [m]\n",
	"- {id: a, url: 'http://x', kind: local}\n",
	"- {id: a, kvEndpoint: 'tcp://h:1', blockSize: 32, gpuBlocks: 9, topic: t, pool: p}\n",
	"[{\"id\":\"a\",\"url\":\"http://h:1\",\"kvEndpoint\":\"ipc:///tmp/x\"}]",
	"&a [*a]",
}

// checkParsed is what every accepted list must be: each worker canonical
// (normalize changes nothing), the ids unique by the id rule.
func checkParsed(t *testing.T, ws []Worker) {
	t.Helper()
	if _, err := NewCatalog(ws, nil); err != nil {
		t.Fatalf("accepted workers that break the rules: %v", err)
	}
	for _, w := range ws {
		again, err := normalize(w)
		if err != nil {
			t.Fatalf("accepted worker does not re-validate: %+v: %v", w, err)
		}
		if !again.Equal(w) {
			t.Fatalf("not canonical: %+v -> %+v", w, again)
		}
	}
}

// FuzzParseShorthand feeds arbitrary text to the --endpoints/--workers
// parser.
func FuzzParseShorthand(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ws, err := ParseShorthand(in, Defaults{Model: "m"})
		if err != nil {
			return
		}
		checkParsed(t, ws)
		for _, w := range ws {
			if w.KVEndpoint == "" && w.Topic != w.ID {
				t.Fatalf("entry without a kv endpoint has topic %q, not its id", w.Topic)
			}
		}
	})
}

// FuzzParseYAML feeds arbitrary text to the --endpoints-file/--workers-file
// parser.
func FuzzParseYAML(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		ws, err := ParseYAML([]byte(in), Defaults{})
		if err != nil {
			return
		}
		checkParsed(t, ws)
	})
}
