package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// hfModel is a model id with a slash, as vLLM serves Hugging Face models.
const hfModel = "meta-llama/Llama-3.1-8B"

// examplesDir is the catalog `switchyard dev` serves; its GatewayBackend
// declares the alias standard-model, which no endpoint serves by name.
const examplesDir = "../../deploy/examples"

func TestModelsOpenAIClient(t *testing.T) {
	noModelList := writeCatalog(t, `apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: open, namespace: inference}
spec:
  tags: {header: x-team-tags}
`)
	tests := []struct {
		name      string
		catalog   string   // what policyd serves; "" runs without policyd
		served    []string // models the router's endpoints serve
		want      []string
		notListed string
	}{
		{name: "no policyd: every model an endpoint serves",
			served: []string{testModel, hfModel}, want: []string{hfModel, testModel}, notListed: "standard-model"},
		{name: "GatewayBackend without a model list: every model an endpoint serves", catalog: noModelList,
			served: []string{testModel, hfModel}, want: []string{hfModel, testModel}, notListed: "standard-model"},
		{name: "GatewayBackend listing models: exactly its public names, alias included", catalog: examplesDir,
			served: []string{"qwen-3.6-27b", "glm-5.3", hfModel}, want: []string{"glm-5.3", "qwen-3.6-27b", "standard-model"}, notListed: hfModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOpts{noNATS: true, cfg: func(c *Config) {
				if tc.catalog != "" {
					c.PolicydAddr = servePolicyd(t, tc.catalog)
				}
			}})
			if tc.catalog != "" {
				e.eventually(t, "policy snapshot", func() bool { return e.gw.catalog.snapshot() != nil })
			}
			up := newVLLM(t, modeOK)
			for i, m := range tc.served {
				e.router.setTargets(m, up.target(fmt.Sprint("w", i)))
			}
			client := openai.NewClient(option.WithBaseURL(e.url+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

			page, err := client.Models.List(t.Context())
			if err != nil {
				t.Fatalf("Models.List: %v", err)
			}
			var ids []string
			for _, m := range page.Data {
				ids = append(ids, m.ID)
				if m.Object != "model" || m.OwnedBy != "switchyard" || !m.JSON.Created.Valid() {
					t.Errorf("model %q: object %q owned_by %q created present %v", m.ID, m.Object, m.OwnedBy, m.JSON.Created.Valid())
				}
			}
			if page.Object != "list" || !slices.Equal(ids, tc.want) {
				t.Errorf("Models.List = %q %q, want list %q", page.Object, ids, tc.want)
			}

			for _, id := range tc.want {
				m, err := client.Models.Get(t.Context(), id)
				if err != nil {
					t.Errorf("Models.Get(%q): %v", id, err)
					continue
				}
				if m.ID != id || m.Object != "model" || m.OwnedBy != "switchyard" {
					t.Errorf("Models.Get(%q) = %+v", id, m)
				}
			}

			_, err = client.Models.Get(t.Context(), tc.notListed)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("Models.Get(%q) = %v, want an API error", tc.notListed, err)
			}
			if apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
				t.Errorf("Models.Get(%q): status %d code %q type %q, want 404 model_not_found invalid_request_error",
					tc.notListed, apiErr.StatusCode, apiErr.Code, apiErr.Type)
			}
		})
	}
}

// TestModelRetrievePaths: a model id's slash may come escaped (the OpenAI
// SDKs) or as is (curl).
func TestModelRetrievePaths(t *testing.T) {
	e := newEnv(t, envOpts{noNATS: true})
	up := newVLLM(t, modeOK)
	e.router.setTargets(hfModel, up.target("w0"))
	tests := []struct {
		path   string
		status int
	}{
		{"/v1/models/meta-llama/Llama-3.1-8B", http.StatusOK},
		{"/v1/models/meta-llama%2FLlama-3.1-8B", http.StatusOK},
		{"/v1/models/meta-llama%2fLlama-3.1-8B", http.StatusOK},
		{"/v1/models/meta-llama", http.StatusNotFound},
		{"/v1/models/Llama-3.1-8B", http.StatusNotFound},
		{"/v1/models/meta-llama/Llama-3.1-8B/extra", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := e.client.Get(e.url + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status != http.StatusOK {
				if d := decodeError(t, resp); d.Code == nil || *d.Code != "model_not_found" {
					t.Errorf("code = %v, want model_not_found", d.Code)
				}
				return
			}
			defer resp.Body.Close()
			var m modelEntry
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.ID != hfModel {
				t.Errorf("model = %+v (%v), want id %q", m, err, hfModel)
			}
		})
	}
}
