package workers

import (
	"context"
	"strings"
	"testing"
	"time"
)

var defaults = Defaults{Model: "m", BlockSize: 16}

func TestParseShorthand(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		d       Defaults
		want    []Spec
		wantErr string
	}{
		{
			name: "dial with and without replay",
			in:   "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558, w1=tcp://h:5557,",
			d:    defaults,
			want: []Spec{
				{ID: "w0", Pool: DefaultPool, Model: "m", KVEndpoint: "tcp://10.0.0.5:5557", ReplayEndpoint: "tcp://10.0.0.5:5558", BlockSize: 16},
				{ID: "w1", Pool: DefaultPool, Model: "m", KVEndpoint: "tcp://h:5557", BlockSize: 16},
			},
		},
		{
			name: "bound worker gets its id as topic",
			in:   "w0=",
			d:    Defaults{Model: "m", Pool: "gpu-a", Topic: "kv"},
			want: []Spec{{ID: "w0", Pool: "gpu-a", Model: "m", Topic: "w0", BlockSize: DefaultBlockSize}},
		},
		{name: "no equals", in: "w0", d: defaults, wantErr: "want id="},
		{name: "wildcard host", in: "w0=tcp://*:5557", d: defaults, wantErr: "cannot be dialled"},
		{name: "bad port", in: "w0=tcp://h:x", d: defaults, wantErr: "port"},
		{name: "bad scheme", in: "w0=http://h:1", d: defaults, wantErr: "unsupported transport"},
		{name: "no model", in: "w0=tcp://h:1", d: Defaults{}, wantErr: "model"},
		{name: "bad id", in: "w:0=tcp://h:1", d: defaults, wantErr: "not allowed"},
		{name: "duplicate", in: "w0=tcp://h:1,w0=tcp://h:2", d: defaults, wantErr: "collide"},
		{name: "collide once tokenised", in: "a.b=tcp://h:1,a_b=tcp://h:2", d: defaults, wantErr: "collide"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseShorthand(tc.in, tc.d)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v", got)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("spec %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestParseFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Spec
		wantErr string
	}{
		{
			name: "full entry",
			in: `
- id: vllm-0
  pool: l40s
  model: qwen
  kvEndpoint: tcp://vllm-0.vllm:5557
  replayEndpoint: tcp://vllm-0.vllm:5558
  blockSize: 32
  topic: kv
  gpuBlocks: 4096
- id: vllm-1
  kvEndpoint: tcp://vllm-1.vllm:5557
`,
			want: []Spec{
				{ID: "vllm-0", Pool: "l40s", Model: "qwen", KVEndpoint: "tcp://vllm-0.vllm:5557", ReplayEndpoint: "tcp://vllm-0.vllm:5558", BlockSize: 32, Topic: "kv", GPUBlocks: 4096},
				{ID: "vllm-1", Pool: DefaultPool, Model: "m", KVEndpoint: "tcp://vllm-1.vllm:5557", BlockSize: 16},
			},
		},
		{name: "unknown key", in: "- {id: a, kvEndpoint: 'tcp://h:1', kv_endpoint: x}", wantErr: "unknown field"},
		{name: "bound without topic", in: "- {id: a}", wantErr: "needs a topic"},
		{name: "bound with one topic twice", in: "- {id: a, topic: t}\n- {id: b, topic: t}", wantErr: "same topic"},
		{name: "negative block size", in: "- {id: a, kvEndpoint: 'tcp://h:1', blockSize: -1}", wantErr: "block size"},
		{name: "not a list", in: "id: a", wantErr: "parse workers yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFile([]byte(tc.in), defaults)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v", got)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("spec %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestStaticWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	specs := Static{{ID: "a"}}
	got := make(chan []Spec, 1)
	done := make(chan error, 1)
	go func() { done <- specs.Watch(ctx, func(s []Spec) { got <- s }) }()
	if s := <-got; len(s) != 1 || s[0].ID != "a" {
		t.Fatalf("update %+v", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// FuzzParseWorkers feeds arbitrary text to both parsers. Whatever they
// accept must re-validate, be unique by lease key, and have a topic when
// bound.
func FuzzParseWorkers(f *testing.F) {
	for _, s := range []string{
		"w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558,w1=tcp://h:5557",
		"w0=,w1=",
		"- {id: a, kvEndpoint: 'tcp://h:1', blockSize: 32}\n",
		"- id: a\n  topic: t\n  gpuBlocks: 9\n",
		"[{\"id\":\"a\",\"kvEndpoint\":\"ipc:///tmp/x\"}]",
		"&a [*a]",
		"a=tcp://[::1]:80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		check := func(specs []Spec) {
			if _, err := Merge(specs); err != nil {
				t.Fatalf("accepted specs that collide: %v", err)
			}
			for _, s := range specs {
				again, err := normalize(s, Defaults{})
				if err != nil {
					t.Fatalf("accepted spec does not re-validate: %+v: %v", s, err)
				}
				if again != s {
					t.Fatalf("not canonical: %+v -> %+v", s, again)
				}
				if s.Bound() && s.Topic == "" {
					t.Fatalf("bound worker without topic: %+v", s)
				}
			}
		}
		if specs, err := ParseShorthand(in, defaults); err == nil {
			check(specs)
		}
		if specs, err := ParseFile([]byte(in), defaults); err == nil {
			check(specs)
		}
	})
}
