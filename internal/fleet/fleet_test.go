package fleet

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/switchyard-dev/switchyard/internal/bus"
)

// local is a worker as the parsers return it without defaults.
func local(id, url string) Worker {
	return Worker{ID: id, Pool: DefaultPool, URL: url, MetricsPath: DefaultMetricsPath, Topic: id, BlockSize: DefaultBlockSize}
}

func TestParseShorthand(t *testing.T) {
	kv := Defaults{Pool: "gpu-a", Model: "m", Topic: "kv", BlockSize: 32}
	tests := []struct {
		name    string
		in      string
		d       Defaults
		want    []Worker
		wantErr string
	}{
		{name: "empty", in: " , ", want: nil},
		{name: "router form: spaces, trailing slash and comma",
			in:   " a=http://w-a:8000/ , b = https://w-b.example/base/ ,",
			want: []Worker{local("a", "http://w-a:8000"), local("b", "https://w-b.example/base")}},
		{name: "kvtracker form: dial with and without replay", d: kv,
			in: "w0=tcp://10.0.0.5:5557|tcp://10.0.0.5:5558, w1=tcp://h:5557",
			want: []Worker{
				{ID: "w0", Pool: "gpu-a", Models: []string{"m"}, MetricsPath: DefaultMetricsPath, KVEndpoint: "tcp://10.0.0.5:5557", ReplayEndpoint: "tcp://10.0.0.5:5558", Topic: "kv", BlockSize: 32},
				{ID: "w1", Pool: "gpu-a", Models: []string{"m"}, MetricsPath: DefaultMetricsPath, KVEndpoint: "tcp://h:5557", Topic: "kv", BlockSize: 32},
			}},
		{name: "kvtracker form: a bound worker's topic is its id", d: kv, in: "w0=",
			want: []Worker{{ID: "w0", Pool: "gpu-a", Models: []string{"m"}, MetricsPath: DefaultMetricsPath, Topic: "w0", BlockSize: 32}}},
		{name: "both in one: the url anywhere, zmq endpoints in order",
			in: "sim-0=tcp://127.0.0.1:5557|http://127.0.0.1:8000/|tcp://127.0.0.1:5567",
			want: []Worker{{ID: "sim-0", Pool: DefaultPool, URL: "http://127.0.0.1:8000", MetricsPath: DefaultMetricsPath,
				KVEndpoint: "tcp://127.0.0.1:5557", ReplayEndpoint: "tcp://127.0.0.1:5567", BlockSize: DefaultBlockSize}}},
		{name: "ipv6", in: "a=http://[::1]:80|tcp://[::1]:5557",
			want: []Worker{{ID: "a", Pool: DefaultPool, URL: "http://[::1]:80", MetricsPath: DefaultMetricsPath, KVEndpoint: "tcp://[::1]:5557", BlockSize: DefaultBlockSize}}},
		{name: "missing equals", in: "a", wantErr: `entry 1 "a": want id=target`},
		{name: "empty id", in: "=http://x", wantErr: "entry 1: id: empty"},
		{name: "bad id char", in: "a b=http://x", wantErr: `entry 1: id: "a b": character ' ' not allowed`},
		{name: "no scheme", in: "a=127.0.0.1:8000", wantErr: `target "127.0.0.1:8000": want http:// or https://`},
		{name: "unknown scheme", in: "w0=udp://h:1", wantErr: "want http:// or https://"},
		{name: "two urls", in: "a=http://x|http://y", wantErr: "two urls"},
		{name: "three zmq endpoints", in: "a=tcp://h:1|tcp://h:2|tcp://h:3", wantErr: "more than two zmq endpoints"},
		{name: "no host", in: "a=http://", wantErr: "entry 1: url: \"http://\": no host"},
		{name: "query", in: "a=http://x/?q=1", wantErr: "query and fragment"},
		{name: "credentials", in: "a=http://u:secret@x", wantErr: "credentials"},
		{name: "wildcard host", in: "w0=tcp://*:5557", wantErr: "entry 1: kvEndpoint: \"tcp://*:5557\": host \"*\" cannot be dialled"},
		{name: "bad port", in: "w0=tcp://h:x", wantErr: "port"},
		{name: "bad replay", in: "w0=tcp://h:1|tcp://h", wantErr: "entry 1: replayEndpoint"},
		{name: "bad pool default", in: "w0=tcp://h:1", d: Defaults{Pool: "a:b"}, wantErr: "entry 1: pool: \"a:b\": character ':' not allowed"},
		{name: "duplicate id", in: "a=http://x,a=http://y", wantErr: `entry 2: duplicate id "a" (also entry 1)`},
		{name: "ids that share a subject", in: "a.b=tcp://h:1,a_b=tcp://h:2", wantErr: `entry 2: id "a_b" collides with entry 1 in pool "default"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShorthand(tt.in, tt.d)
			checkParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		d       Defaults
		want    []Worker
		wantErr string
	}{
		{name: "a router's endpoints file",
			in: "- id: sim-0\n  url: http://127.0.0.1:8001\n  models: [qwen3-8b, llama-3.1-8b]\n  kind: local\n- id: sim-1\n  url: http://127.0.0.1:8002/\n",
			want: []Worker{
				{ID: "sim-0", Pool: DefaultPool, URL: "http://127.0.0.1:8001", Models: []string{"qwen3-8b", "llama-3.1-8b"}, MetricsPath: DefaultMetricsPath, BlockSize: DefaultBlockSize},
				{ID: "sim-1", Pool: DefaultPool, URL: "http://127.0.0.1:8002", MetricsPath: DefaultMetricsPath, BlockSize: DefaultBlockSize},
			}},
		{name: "a kvtracker's workers file", d: Defaults{Model: "m", BlockSize: 16},
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
			want: []Worker{
				{ID: "vllm-0", Pool: "l40s", Models: []string{"qwen"}, MetricsPath: DefaultMetricsPath, KVEndpoint: "tcp://vllm-0.vllm:5557", ReplayEndpoint: "tcp://vllm-0.vllm:5558", BlockSize: 32, Topic: "kv", GPUBlocks: 4096},
				{ID: "vllm-1", Pool: DefaultPool, Models: []string{"m"}, MetricsPath: DefaultMetricsPath, KVEndpoint: "tcp://vllm-1.vllm:5557", BlockSize: 16},
			}},
		{name: "both in one entry, as JSON",
			in:   `[{"id":"a","url":"http://h:8000","metricsPath":"/vllm/metrics","kvEndpoint":"ipc:///tmp/a","topic":"t"}]`,
			want: []Worker{{ID: "a", Pool: DefaultPool, URL: "http://h:8000", MetricsPath: "/vllm/metrics", KVEndpoint: "ipc:///tmp/a", Topic: "t", BlockSize: DefaultBlockSize}}},
		{name: "empty document", in: "", want: []Worker{}},
		{name: "unknown key", in: "- id: a\n  url: http://x\n  modles: [m]\n", wantErr: "unknown field"},
		{name: "not a list", in: "id: a\nurl: http://x\n", wantErr: "parse workers yaml"},
		{name: "provider kind", in: "- {id: a, url: 'http://x', kind: provider}\n", wantErr: `[0].kind: "provider"`},
		{name: "model and models", in: "- {id: a, url: 'http://x', model: m, models: [n]}\n", wantErr: "[0].model: set model or models, not both"},
		{name: "empty model", in: "- {id: a, url: 'http://x', models: ['']}\n", wantErr: "[0].models[0]"},
		{name: "model twice", in: "- {id: a, url: 'http://x', models: [m, m]}\n", wantErr: `[0].models[1]: "m" listed twice`},
		{name: "bad url", in: "- {id: a, url: 'x:/y'}\n", wantErr: "[0].url: \"x:/y\": scheme must be http or https"},
		{name: "bad kv endpoint", in: "- {id: a, url: 'http://x'}\n- {id: b, kvEndpoint: 'tcp://h'}\n", wantErr: "[1].kvEndpoint"},
		{name: "bad metrics path", in: "- {id: a, url: 'http://x', metricsPath: metrics}\n", wantErr: "[0].metricsPath"},
		{name: "nothing to reach it by", in: "- {id: a}\n", wantErr: `[0]: worker "a": nothing to reach it by`},
		{name: "negative block size", in: "- {id: a, kvEndpoint: 'tcp://h:1', blockSize: -1}", wantErr: "[0].blockSize: -1"},
		{name: "negative gpu blocks", in: "- {id: a, kvEndpoint: 'tcp://h:1', gpuBlocks: -1}", wantErr: "[0].gpuBlocks"},
		{name: "duplicate id", in: "- {id: a, url: 'http://x'}\n- {id: a, url: 'http://y'}\n", wantErr: `[1]: duplicate id "a" (also [0])`},
		{name: "same id in two pools", in: "- {id: a, pool: p, url: 'http://x'}\n- {id: a, pool: q, url: 'http://y'}\n", wantErr: `duplicate id "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseYAML([]byte(tt.in), tt.d)
			checkParse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

// checkParse holds a parser's answer to the case's: the workers, or an
// error containing wantErr that leaks no password.
func checkParse(t *testing.T, got []Worker, err error, want []Worker, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want containing %q", err, wantErr)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Fatalf("error leaks the password: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// TestOneSyntaxForBoth: what the router and the kvtracker were given in
// their own syntaxes describes the same workers as the combined entry.
func TestOneSyntaxForBoth(t *testing.T) {
	both, err := ParseShorthand("sim-0=http://h:8000|tcp://h:5557|tcp://h:5567", Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	router, _ := ParseShorthand("sim-0=http://h:8000", Defaults{})
	tracker, _ := ParseShorthand("sim-0=tcp://h:5557|tcp://h:5567", Defaults{})
	if w := both[0]; w.URL != router[0].URL || w.KVEndpoint != tracker[0].KVEndpoint || w.ReplayEndpoint != tracker[0].ReplayEndpoint {
		t.Fatalf("combined %+v, router %+v, kvtracker %+v", w, router[0], tracker[0])
	}
	file, err := ParseYAML([]byte("- {id: sim-0, url: 'http://h:8000', kvEndpoint: 'tcp://h:5557', replayEndpoint: 'tcp://h:5567'}"), Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	if !file[0].Equal(both[0]) {
		t.Fatalf("yaml %+v, shorthand %+v", file[0], both[0])
	}
}

func TestIDRule(t *testing.T) {
	for _, id := range []string{"sim-0", "vllm-0.vllm", "a_b", "pool/w:1", "fd00::1", strings.Repeat("x", 128)} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "a b", "a,b", "a=b", "a|b", "a*", "a>", "é", strings.Repeat("x", 129)} {
		if err := ValidateID(id); err == nil {
			t.Errorf("ValidateID(%q) accepted", id)
		}
	}
	if err := ValidatePool("a:b"); err == nil {
		t.Error("a pool with ':' accepted")
	}
}

// TestSubjectKeyIsTheBus holds the id rule's collision check to what the
// bus does with names: two valid (pool, id) pairs share a KV delta subject
// exactly when their subject keys are equal.
func TestSubjectKeyIsTheBus(t *testing.T) {
	names := []string{"a", "a.b", "a_b", "a-b", "a/b", "a:b", "A.b", "a..b", "a__b", "a._b"}
	for _, p1 := range []string{"p", "p.q", "p_q"} {
		for _, p2 := range []string{"p", "p.q", "p_q"} {
			for _, a := range names {
				for _, b := range names {
					same := bus.KVDeltaSubject(p1, a) == bus.KVDeltaSubject(p2, b)
					if (subjectKey(p1, a) == subjectKey(p2, b)) != same {
						t.Errorf("(%s, %s) and (%s, %s): subjects equal %v, keys disagree", p1, a, p2, b, same)
					}
				}
			}
		}
	}
}

// TestCRDPatternIsTheIDRule: the InferenceWorkerSet CRD's pattern for
// static ids (what the API server enforces before policyd sees them)
// accepts what ValidateID accepts.
func TestCRDPatternIsTheIDRule(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kustomize", "base", "crds", "switchyard.dev_inferenceworkersets.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties struct {
							Spec struct {
								Properties struct {
									Static struct {
										Items struct {
											Properties struct {
												ID struct {
													Pattern   string `json:"pattern"`
													MaxLength int    `json:"maxLength"`
												} `json:"id"`
											} `json:"properties"`
										} `json:"items"`
									} `json:"static"`
								} `json:"properties"`
							} `json:"spec"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	id := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec.Properties.Static.Items.Properties.ID
	re, err := regexp.Compile(id.Pattern)
	if err != nil || id.MaxLength != maxNameLen {
		t.Fatalf("crd id pattern %q (%v), maxLength %d", id.Pattern, err, id.MaxLength)
	}
	for c := 0; c < 256; c++ {
		s := "a" + string(rune(c))
		if (ValidateID(s) == nil) != re.MatchString(s) {
			t.Errorf("%q: ValidateID says %v, the CRD's pattern %v", s, ValidateID(s), re.MatchString(s))
		}
	}
}

func TestNewCatalog(t *testing.T) {
	c, err := NewCatalog([]Worker{{ID: "a", URL: "http://a/"}}, []Provider{{Name: "bedrock", BaseURL: "https://b/v1/", Models: []string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers[0].URL != "http://a" || c.Workers[0].Pool != DefaultPool || c.Providers[0].BaseURL != "https://b/v1" {
		t.Fatalf("not canonical: %+v", c)
	}
	for _, tc := range []struct {
		name    string
		ws      []Worker
		ps      []Provider
		wantErr string
	}{
		{"worker takes a provider's id", []Worker{{ID: "provider/x", URL: "http://a"}}, []Provider{{Name: "x", BaseURL: "http://b"}}, `provider "x": duplicate id "provider/x" (also worker "provider/x")`},
		{"field path", []Worker{{ID: "a", Group: "qwen-workers", KVEndpoint: "tcp://*:5557"}}, nil, `worker "a" of qwen-workers: kvEndpoint: "tcp://*:5557"`},
		{"provider url", nil, []Provider{{Name: "x", BaseURL: "ftp://b"}}, `provider "x": baseURL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewCatalog(tc.ws, tc.ps); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestJoinKeepsBaseAndDropsWhatBreaksTheRules(t *testing.T) {
	base, err := NewCatalog([]Worker{{ID: "a", URL: "http://flags-a"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	more := Catalog{
		Workers: []Worker{
			{ID: "a", URL: "http://catalog-a", Group: "g"},
			{ID: "b", URL: "http://b/", Group: "g", Models: []string{"m"}},
			{ID: "b.c", URL: "http://bc", Group: "g"},
			{ID: "b_c", URL: "http://bc2", Group: "h"},
			{ID: "bad id", URL: "http://x", Group: "g"},
		},
		Providers: []Provider{{Name: "p", BaseURL: "http://p", Models: []string{"m"}}, {Name: "p", BaseURL: "http://p2"}},
	}
	got, dropped := Join(base, more)
	var ids []string
	for _, w := range got.Workers {
		ids = append(ids, w.ID+"="+w.URL)
	}
	if want := []string{"a=http://flags-a", "b=http://b", "b.c=http://bc"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("workers %v, want %v", ids, want)
	}
	if len(got.Providers) != 1 || got.Providers[0].BaseURL != "http://p" {
		t.Fatalf("providers %+v", got.Providers)
	}
	if len(dropped) != 4 {
		t.Fatalf("dropped %v, want 4 reasons", dropped)
	}
	for i, want := range []string{`worker "a" of g: duplicate id "a" (also worker "a")`, `worker "b_c" of h: id "b_c" collides with worker "b.c" of g`, `worker "bad id" of g: id:`, `provider "p": duplicate id`} {
		if !strings.Contains(dropped[i].Error(), want) {
			t.Errorf("dropped[%d] = %v, want containing %q", i, dropped[i], want)
		}
	}
	if len(base.Workers) != 1 {
		t.Fatal("Join changed its base")
	}
}

func TestStaticWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src := Static{Workers: []Worker{{ID: "a", Models: []string{"m"}}}}
	got := make(chan Catalog, 1)
	done := make(chan error, 1)
	go func() { done <- src.Watch(ctx, func(c Catalog) { got <- c }) }()
	c := <-got
	if len(c.Workers) != 1 || c.Workers[0].ID != "a" {
		t.Fatalf("update %+v", c)
	}
	c.Workers[0].Models[0] = "changed"
	if src.Workers[0].Models[0] != "m" {
		t.Fatal("the consumer's copy shares memory with the source")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestWorkerEqual(t *testing.T) {
	a := local("a", "http://a")
	b := a
	b.Models = []string{"m"}
	if a.Equal(b) || !a.Equal(a) {
		t.Fatal("Equal ignores models")
	}
	b = a
	b.KVEndpoint = "tcp://h:1"
	if a.Equal(b) {
		t.Fatal("Equal ignores the kv endpoint")
	}
}
