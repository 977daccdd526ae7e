package policy

import (
	"strings"
	"testing"
)

func typedProviderYAML(baseURL, spec string) string {
	return `apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: p, namespace: inference}
spec:
  baseURL: ` + baseURL + `
  models: [{name: m, servedName: gpt-4o-prod}]
` + spec
}

// TestAzureDatabricksSettings: spec.azure is required by type AzureOpenAI
// (with an api-version, and a key or a Microsoft Entra ID application,
// exactly one) and refused elsewhere;
// spec.databricks is only for type Databricks, whose OAuth client excludes
// spec.credentials; the base URLs have the shape the adapters append to.
func TestAzureDatabricksSettings(t *testing.T) {
	const azure, dbx = "https://contoso.openai.azure.com", "https://adb-1234.5.azuredatabricks.net/serving-endpoints"
	key := "  credentials: {secretRef: {name: k}}\n"
	oauth := "  databricks: {oauth: {clientID: sp-1, clientSecretRef: {name: sp, key: clientSecret}}}\n"
	entra := func(fields string) string {
		return "  type: AzureOpenAI\n  azure:\n    apiVersion: \"2024-10-21\"\n    entra: {" + fields + "}\n"
	}
	const app = "clientID: 0d6f7c1a-1111-4222-8333-944445555666, clientSecretRef: {name: app, key: clientSecret}"
	for _, tc := range []struct {
		name, url, spec, path, msg string
	}{
		{"azure ok", azure, "  type: AzureOpenAI\n  azure: {apiVersion: \"2024-10-21\"}\n" + key, "", ""},
		{"azure preview ok", azure + "/", "  type: AzureOpenAI\n  azure: {apiVersion: \"2025-01-01-preview\"}\n  credentials: {env: AZURE_OPENAI_API_KEY}\n", "", ""},
		{"azure without settings", azure, "  type: AzureOpenAI\n" + key, "spec.azure", "required by type AzureOpenAI"},
		{"azure without version", azure, "  type: AzureOpenAI\n  azure: {}\n" + key, "spec.azure.apiVersion", "required"},
		{"azure bad version", azure, "  type: AzureOpenAI\n  azure: {apiVersion: v1}\n" + key, "spec.azure.apiVersion", "not an Azure OpenAI api-version"},
		{"azure neither key nor Entra", azure, "  type: AzureOpenAI\n  azure: {apiVersion: \"2024-10-21\"}\n", "spec.credentials", "or set spec.azure.entra"},
		{"azure Entra ok", azure, entra("tenantID: 72f988bf-86f1-41af-91ab-2d7cd011db47, " + app), "", ""},
		{"azure Entra domain and authority ok", azure, entra("tenantID: contoso.onmicrosoft.com, authorityHost: 'https://login.microsoftonline.us/', " + app), "", ""},
		{"azure Entra and a key", azure, entra("tenantID: contoso.onmicrosoft.com, "+app) + key, "spec.credentials", "not both"},
		{"azure Entra no tenant", azure, entra(app), "spec.azure.entra.tenantID", "required"},
		{"azure Entra bad tenant", azure, entra("tenantID: 'common/x', " + app), "spec.azure.entra.tenantID", "not a tenant id"},
		{"azure Entra no client id", azure, entra("tenantID: contoso.onmicrosoft.com, clientSecretRef: {name: app}"), "spec.azure.entra.clientID", "required"},
		{"azure Entra no secret", azure, entra("tenantID: contoso.onmicrosoft.com, clientID: c, clientSecretRef: {name: ''}"), "spec.azure.entra.clientSecretRef.name", "required"},
		{"azure Entra authority with a path", azure, entra("tenantID: contoso.onmicrosoft.com, authorityHost: 'https://login.microsoftonline.com/contoso', " + app), "spec.azure.entra.authorityHost", "scheme and host only"},
		{"azure Entra authority not a URL", azure, entra("tenantID: contoso.onmicrosoft.com, authorityHost: login.microsoftonline.com, " + app), "spec.azure.entra.authorityHost", "scheme and host only"},
		{"azure URL with /openai", azure + "/openai/deployments/x", "  type: AzureOpenAI\n  azure: {apiVersion: \"2024-10-21\"}\n" + key, "spec.baseURL", "resource's endpoint only"},
		{"azure on another type", "https://api.openai.com/v1", "  type: OpenAICompatible\n  azure: {apiVersion: \"2024-10-21\"}\n", "spec.azure", "only for type AzureOpenAI"},
		{"databricks PAT ok", dbx, "  type: Databricks\n" + key, "", ""},
		{"databricks OAuth ok", dbx + "/", "  type: Databricks\n" + oauth, "", ""},
		{"databricks without credentials", dbx, "  type: Databricks\n", "spec.credentials", "required by type Databricks"},
		{"databricks both", dbx, "  type: Databricks\n" + oauth + key, "spec.credentials", "not both"},
		{"databricks no client id", dbx, "  type: Databricks\n  databricks: {oauth: {clientID: '', clientSecretRef: {name: sp}}}\n", "spec.databricks.oauth.clientID", "required"},
		{"databricks no secret", dbx, "  type: Databricks\n  databricks: {oauth: {clientID: sp-1, clientSecretRef: {name: ''}}}\n", "spec.databricks.oauth.clientSecretRef.name", "required"},
		{"databricks URL", "https://adb-1234.5.azuredatabricks.net/serving-endpoints/m/invocations", "  type: Databricks\n" + key, "spec.baseURL", "https://<workspace>/serving-endpoints"},
		{"databricks on another type", "https://api.openai.com/v1", "  type: OpenAICompatible\n" + oauth, "spec.databricks", "only for type Databricks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, diags := ParseYAML("p.yaml", []byte(typedProviderYAML(tc.url, tc.spec)))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			s, diags := Compile(objs)
			if tc.path == "" {
				if s == nil || diags.HasErrors() {
					t.Fatalf("refused: %s", diags.Error())
				}
				return
			}
			if !strings.Contains(diags.Error(), tc.path+": ") || !strings.Contains(diags.Error(), tc.msg) {
				t.Fatalf("diagnostics %q, want %s: %s", diags.Error(), tc.path, tc.msg)
			}
		})
	}
}

// TestAzureDatabricksSettingsFlow: the api-version, the Entra ID
// application (its authority host defaulted) and the OAuth client reach
// the compiled provider and survive the snapshot's proto; the proto
// holds where the secret is, not a secret.
func TestAzureDatabricksSettingsFlow(t *testing.T) {
	src := typedProviderYAML("https://contoso.openai.azure.com", "  type: AzureOpenAI\n  azure: {apiVersion: \"2024-10-21\"}\n  credentials: {secretRef: {name: k}}\n") + `---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: dbx, namespace: inference}
spec:
  type: Databricks
  baseURL: https://adb-1.2.azuredatabricks.net/serving-endpoints
  databricks: {oauth: {clientID: sp-1, clientSecretRef: {name: sp}}}
  models: [{name: m}]
---
apiVersion: switchyard.dev/v1alpha1
kind: InferenceProvider
metadata: {name: entra, namespace: inference}
spec:
  type: AzureOpenAI
  baseURL: https://contoso.openai.azure.com
  azure:
    apiVersion: "2024-10-21"
    entra: {tenantID: contoso.onmicrosoft.com, clientID: app-1, clientSecretRef: {name: app, key: clientSecret}}
  models: [{name: m}]
`
	objs, diags := ParseYAML("p.yaml", []byte(src))
	s, d2 := Compile(objs)
	if s == nil {
		t.Fatal(diags.Error(), d2.Error())
	}
	check := func(s *Snapshot, where string) {
		if got := s.Provider("p").Settings.AzureAPIVersion; got != "2024-10-21" {
			t.Fatalf("%s: api-version %q", where, got)
		}
		o := s.Provider("dbx").Settings.DatabricksOAuth
		if o == nil || *o != (DatabricksOAuth{ClientID: "sp-1", SecretName: "sp", SecretKey: "apiKey"}) {
			t.Fatalf("%s: oauth %+v", where, o)
		}
		e := s.Provider("entra").Settings.AzureEntra
		if e == nil || *e != (AzureEntra{TenantID: "contoso.onmicrosoft.com", ClientID: "app-1", AuthorityHost: DefaultEntraAuthorityHost, SecretName: "app", SecretKey: "clientSecret"}) {
			t.Fatalf("%s: entra %+v", where, e)
		}
		if s.Provider("p").Settings.AzureEntra != nil || s.Provider("entra").Settings.AzureAPIVersion != "2024-10-21" {
			t.Fatalf("%s: entra on the key provider, or no api-version with it", where)
		}
		if s.Provider("p").Settings.DatabricksOAuth != nil || s.Provider("dbx").Settings.AzureAPIVersion != "" {
			t.Fatalf("%s: settings on the other type", where)
		}
	}
	check(s, "compiled")
	back, err := FromProto(ToProto(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	check(back, "round trip")
}
