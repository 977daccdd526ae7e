package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
)

// refuseAll is a step that refuses every request, as an API key step
// refuses an unknown key.
type refuseAll struct{}

func (refuseAll) Admit(context.Context, *admission.Request) error {
	return &admission.Refusal{Status: http.StatusUnauthorized, Code: "invalid_api_key", Message: "no such key"}
}

func init() {
	admission.Steps.Register("test-refuse-all", func(admission.Deps) (admission.Step, error) { return refuseAll{}, nil })
}

// TestAdmissionRefusal: a step's refusal reaches the client in the API's
// error shape with the step's status and code, and nothing is routed.
func TestAdmissionRefusal(t *testing.T) {
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) { c.Admission = "test-refuse-all,default-tenant" }})
	e.router.setTargets(testModel, up.target("w0"))
	resp, err := e.client.Post(e.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body struct {
		Error struct{ Type, Code, Message string }
	}
	_ = json.Unmarshal(b, &body)
	if resp.StatusCode != http.StatusUnauthorized || body.Error.Code != "invalid_api_key" || body.Error.Message != "no such key" {
		t.Errorf("got %d %s", resp.StatusCode, b)
	}
	if n := len(e.router.calls()); n != 0 {
		t.Errorf("a refused request was routed (%d Route calls)", n)
	}
}

// TestAdmissionConfig: the chain is named by --admission and checked.
func TestAdmissionConfig(t *testing.T) {
	for _, tt := range []struct{ chain, want string }{
		{"default-tenant", ""},
		{"", "at least one step"},
		{"api-keys", `unknown admission step "api-keys": want one of apikey, default-tenant`},
		{"default-tenant,default-tenant", "listed twice"},
	} {
		c := DefaultConfig()
		c.Admission = tt.chain
		err := c.Validate()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("--admission %q: %v, want %q", tt.chain, err, tt.want)
		}
	}
}

// TestTargetWithoutAdapter: a target whose type has no adapter is never
// sent a request in the wrong API; the client gets a 502.
func TestTargetWithoutAdapter(t *testing.T) {
	up := newVLLM(t, modeOK)
	e := newEnv(t, envOpts{noNATS: true})
	tg := up.target("w0")
	tg.Type = "NoSuchProvider"
	e.router.setTargets(testModel, tg)
	resp, err := e.client.Post(e.url+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"test-model","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the upstream got %d requests in an API it does not speak", n)
	}
}
