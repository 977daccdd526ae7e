package endpoints

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestParseShorthand(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Spec
		wantErr string
	}{
		{name: "empty", in: "", want: nil},
		{name: "one", in: "sim-0=http://127.0.0.1:8001",
			want: []Spec{{ID: "sim-0", URL: "http://127.0.0.1:8001", Kind: KindLocal}}},
		{name: "two with spaces, trailing slash and trailing comma",
			in: " a=http://w-a:8000/ , b = https://w-b.example/base/ ,",
			want: []Spec{
				{ID: "a", URL: "http://w-a:8000", Kind: KindLocal},
				{ID: "b", URL: "https://w-b.example/base", Kind: KindLocal},
			}},
		{name: "missing equals", in: "a", wantErr: "want id=url"},
		{name: "empty id", in: "=http://x", wantErr: "endpoint id is empty"},
		{name: "empty url", in: "a=", wantErr: "url is empty"},
		{name: "bad scheme", in: "a=ftp://x", wantErr: "scheme must be http or https"},
		{name: "no scheme", in: "a=127.0.0.1:8000", wantErr: "url"},
		{name: "no host", in: "a=http://", wantErr: "no host"},
		{name: "query", in: "a=http://x/?q=1", wantErr: "query and fragment"},
		{name: "credentials", in: "a=http://u:secret@x", wantErr: "credentials"},
		{name: "bad id char", in: "a b=http://x", wantErr: "not allowed"},
		{name: "duplicate id", in: "a=http://x,a=http://y", wantErr: `duplicate endpoint id "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseShorthand(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				if strings.Contains(tt.in, "secret") && strings.Contains(err.Error(), "secret") {
					t.Fatalf("error leaks the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
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
		{name: "models optional, kind defaults",
			in: `
- id: sim-0
  url: http://127.0.0.1:8001
  models: [qwen3-8b, llama-3.1-8b]
  kind: local
- id: sim-1
  url: http://127.0.0.1:8002/
`,
			want: []Spec{
				{ID: "sim-0", URL: "http://127.0.0.1:8001", Models: []string{"qwen3-8b", "llama-3.1-8b"}, Kind: KindLocal},
				{ID: "sim-1", URL: "http://127.0.0.1:8002", Kind: KindLocal},
			}},
		{name: "empty document", in: "", want: []Spec{}},
		{name: "unknown field", in: "- id: a\n  url: http://x\n  modles: [m]\n", wantErr: "unknown field"},
		{name: "not a list", in: "id: a\nurl: http://x\n", wantErr: "parse endpoints yaml"},
		{name: "provider kind not yet", in: "- id: a\n  url: http://x\n  kind: provider\n", wantErr: `kind "provider"`},
		{name: "empty model", in: "- id: a\n  url: http://x\n  models: ['']\n", wantErr: "empty model name"},
		{name: "model twice", in: "- id: a\n  url: http://x\n  models: [m, m]\n", wantErr: "listed twice"},
		{name: "duplicate id", in: "- {id: a, url: 'http://x'}\n- {id: a, url: 'http://y'}\n", wantErr: "duplicate endpoint id"},
		{name: "bad url", in: "- {id: a, url: 'x:/y'}\n", wantErr: "scheme must be http or https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFile([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMergeRejectsDuplicatesAcrossSources(t *testing.T) {
	a := []Spec{{ID: "x", URL: "http://a", Kind: KindLocal}}
	b := []Spec{{ID: "x", URL: "http://b", Kind: KindLocal}}
	if _, err := Merge(a, b); err == nil || !strings.Contains(err.Error(), `duplicate endpoint id "x"`) {
		t.Fatalf("err = %v, want duplicate id", err)
	}
	got, err := Merge(a, []Spec{{ID: "y", URL: "http://b", Kind: KindLocal}})
	if err != nil || len(got) != 2 {
		t.Fatalf("got %v, %v; want 2 specs", got, err)
	}
}

func TestStaticWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	specs := Static{{ID: "a", URL: "http://a", Kind: KindLocal}}
	got := make(chan []Spec, 1)
	done := make(chan error, 1)
	go func() { done <- specs.Watch(ctx, func(s []Spec) { got <- s }) }()
	if s := <-got; !reflect.DeepEqual(s, []Spec(specs)) {
		t.Fatalf("update got %+v", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch returned %v", err)
	}
}

// FuzzParseEndpoints feeds arbitrary text to both configuration parsers.
// Whatever they accept must be canonical: valid unique ids, and URLs that
// normalise to themselves.
func FuzzParseEndpoints(f *testing.F) {
	for _, s := range []string{
		"sim-0=http://127.0.0.1:8001,sim-1=http://127.0.0.1:8002",
		"a=https://x/y/,",
		"- id: a\n  url: http://x\n  models: [m]\n",
		"- {id: a, url: 'http://x', kind: local}\n",
		"[{\"id\":\"a\",\"url\":\"http://h:1\"}]",
		"&a [*a]",
		"a=http://[::1]:80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		check := func(specs []Spec) {
			seen := map[string]bool{}
			for _, s := range specs {
				if err := ValidateID(s.ID); err != nil {
					t.Fatalf("accepted invalid id %q: %v", s.ID, err)
				}
				if seen[s.ID] {
					t.Fatalf("accepted duplicate id %q", s.ID)
				}
				seen[s.ID] = true
				again, err := normalize(s)
				if err != nil {
					t.Fatalf("accepted spec does not re-validate: %+v: %v", s, err)
				}
				if again.URL != s.URL {
					t.Fatalf("url not canonical: %q -> %q", s.URL, again.URL)
				}
				if s.Kind != KindLocal {
					t.Fatalf("kind %q", s.Kind)
				}
			}
		}
		if specs, err := ParseShorthand(in); err == nil {
			check(specs)
		}
		if specs, err := ParseFile([]byte(in)); err == nil {
			check(specs)
		}
	})
}
