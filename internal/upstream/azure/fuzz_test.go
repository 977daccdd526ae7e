package azure

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"testing/iotest"
)

// FuzzFilter: the stream filter never fails on its own, passes a stream
// without prompt_filter_results byte for byte, and never adds bytes.
func FuzzFilter(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[],\"prompt_filter_results\":[{}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1},\"prompt_filter_results\":[]}\r\n\r\n"))
	f.Add([]byte("event: x\ndata: {\"prompt_filter_results\":1}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := io.ReadAll(newFilter(io.NopCloser(iotest.OneByteReader(bytes.NewReader(in)))))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > len(in) {
			t.Fatalf("%d bytes out of %d", len(out), len(in))
		}
		if !bytes.Contains(in, []byte(`"prompt_filter_results"`)) && !bytes.Equal(in, out) {
			t.Fatalf("changed a stream without filter results:\n%q\n%q", in, out)
		}
	})
}

// FuzzError: any error body becomes OpenAI's error, with a message and a
// type, and never quotes the key.
func FuzzError(f *testing.F) {
	f.Add(401, []byte(`{"error":{"code":"401","message":"Access denied"}}`))
	f.Add(400, []byte(`{"error":{"message":"filtered","type":null,"param":"prompt","code":"content_filter","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`))
	f.Add(429, []byte(`{"error":{"code":429,"message":"k3y"}}`))
	f.Add(502, []byte(`<html>`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		resp := translateError(&http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body))}, []string{"k3y"})
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct{ Message, Type string }
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s: %v", b, err)
		}
		if bytes.Contains([]byte(e.Error.Message), []byte("k3y")) {
			t.Fatalf("the key in %s", b)
		}
	})
}
