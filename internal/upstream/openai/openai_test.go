package openai_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	_ "github.com/switchyard-dev/switchyard/internal/upstream/builtin"
)

func TestRoundTrip(t *testing.T) {
	type seen struct{ path, auth, accept, body, ctype string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Accept"), string(b), r.Header.Get("Content-Type")}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()
	set := upstream.NewSet(http.DefaultTransport)
	tests := []struct {
		name     string
		target   upstream.Target
		wantPath string
		wantAuth string
	}{
		{"worker", upstream.Target{Type: upstream.TypeWorker, BaseURL: srv.URL + "/"}, "/v1/chat/completions", ""},
		{"provider", upstream.Target{Type: "OpenAICompatible", BaseURL: srv.URL + "/v1", APIKey: "sk-1"}, "/v1/chat/completions", "Bearer sk-1"},
		{"provider with a base path", upstream.Target{Type: "OpenAICompatible", BaseURL: srv.URL + "/serving-endpoints/v1/", APIKey: "k"}, "/serving-endpoints/v1/chat/completions", "Bearer k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := set.For(tt.target.Type)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"Accept": {"text/event-stream"}}
			resp, err := a.RoundTrip(context.Background(), tt.target, upstream.Request{Path: "/v1/chat/completions", Body: []byte(`{"x":1}`), Header: h})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTeapot {
				t.Errorf("status %d: the upstream's answer must come back as it is", resp.StatusCode)
			}
			s := <-got
			want := seen{tt.wantPath, tt.wantAuth, "text/event-stream", `{"x":1}`, "application/json"}
			if s != want {
				t.Errorf("upstream saw %+v, want %+v", s, want)
			}
		})
	}
}

func TestUnknownType(t *testing.T) {
	set := upstream.NewSet(http.DefaultTransport)
	if _, err := set.For("NoSuchProvider"); !errors.Is(err, upstream.ErrNoAdapter) {
		t.Errorf("For(NoSuchProvider) = %v, want ErrNoAdapter", err)
	}
}
