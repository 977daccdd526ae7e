package router

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func jsonUnmarshalString(b []byte, s *string) error { return json.Unmarshal(b, s) }

func containsInvalidUTF8(s string) bool { return !utf8.ValidString(s) }

func TestReplaceModel(t *testing.T) {
	tests := []struct {
		body, model, want string
		err               bool
	}{
		{body: `{"model":"standard-model","messages":[{"role":"user","content":"model"}]}`, model: "glm-5.3",
			want: `{"model":"glm-5.3","messages":[{"role":"user","content":"model"}]}`},
		{body: "{ \"stream\": true,\n  \"model\" : \"a\" }", model: "x", want: "{ \"stream\": true,\n  \"model\" : \"x\" }"},
		{body: `{"metadata":{"model":"inner"},"model":"a"}`, model: "b", want: `{"metadata":{"model":"inner"},"model":"b"}`},
		{body: `{"model":"a","model":"c"}`, model: "b", want: `{"model":"a","model":"b"}`},
		{body: `{"model":"a"}`, model: `zai.glm-5-3-v1:0`, want: `{"model":"zai.glm-5-3-v1:0"}`},
		{body: `{"model":7}`, model: "b", err: true},
		{body: `{"messages":[]}`, model: "b", err: true},
		{body: `["model"]`, model: "b", err: true},
		{body: `{"model":"a"`, model: "b", err: true},
	}
	for _, tt := range tests {
		got, err := replaceModel([]byte(tt.body), tt.model)
		if (err != nil) != tt.err {
			t.Fatalf("%s: err %v, want error %v", tt.body, err, tt.err)
		}
		if !tt.err && string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.body, got, tt.want)
		}
	}
}
