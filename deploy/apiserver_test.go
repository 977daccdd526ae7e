package deploy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/kubeapi"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/policyd/kube"
)

// prometheusOperator is the release whose CRDs (PodMonitor) the
// monitoring component is applied against, fetched from the Go module
// proxy (the module carries its example CRDs).
const prometheusOperator = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

// TestAgainstAPIServer applies every set to a real kube-apiserver with
// server-side apply and strict field validation, as `kubectl apply
// --server-side -k` would: every object is accepted, the CRDs are
// established, the API server's Pod Security admission warns about no
// workload and admits every pod template in the restricted namespace;
// deploy/examples is accepted; invalid resources are refused with the
// messages users see; and policyd, with nothing but its own service
// account's token and the base's RBAC, follows the dev overlay's
// resources and writes their status, and may read nothing else.
func TestAgainstAPIServer(t *testing.T) {
	api := kubeapi.Start(t)
	warn := &kubeapi.Warnings{}
	admin := api.AdminClient(t, warn)

	// What the monitoring component needs of the cluster.
	for _, crd := range operatorCRDs(t, "podmonitors") {
		if err := api.ServerSideApply(t, admin, crd, false); err != nil {
			t.Fatalf("the Prometheus Operator's CRD %s: %v", crd.GetName(), err)
		}
		api.WaitEstablished(t, crd.GetName())
	}

	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			// A StatefulSet's volumeClaimTemplates cannot change (the
			// overlays size them differently): each set makes its own.
			sts := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
			if err := admin.Resource(sts).Namespace("switchyard").DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
			apply(t, api, admin, warn, render(t, s))
		})
	}

	t.Run("examples", func(t *testing.T) {
		apply(t, api, admin, warn, render(t, set{name: "examples", dir: "examples"}))
	})

	t.Run("invalid resources", func(t *testing.T) { refused(t, api, admin) })

	t.Run("policyd with its service account", func(t *testing.T) { policydAsServiceAccount(t, api, admin) })
}

// apply applies a rendered set: CRDs and namespaces first (and waits for
// the CRDs), then the rest; then dry-runs a pod of every workload in
// namespace switchyard through admission.
func apply(t *testing.T, api *kubeapi.Server, admin dynamic.Interface, warn *kubeapi.Warnings, objs []*unstructured.Unstructured) {
	t.Helper()
	first := func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "CustomResourceDefinition" || u.GetKind() == "Namespace"
	}
	for _, pass := range []bool{true, false} {
		for _, u := range objs {
			if first(u) != pass {
				continue
			}
			if err := api.ServerSideApply(t, admin, u, false); err != nil {
				t.Errorf("%s %s/%s refused: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
				continue
			}
			if u.GetKind() == "CustomResourceDefinition" {
				api.WaitEstablished(t, u.GetName())
			}
			for _, w := range warn.Take() {
				t.Errorf("%s %s/%s: the API server warns: %s", u.GetKind(), u.GetNamespace(), u.GetName(), w)
			}
		}
	}
	for _, w := range workloads(objs) {
		if !w.restricted() {
			continue
		}
		spec := podSpec(w)
		pod := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": strings.ToLower(w.u.GetKind()) + "-" + w.u.GetName(), "namespace": w.u.GetNamespace(), "labels": toAny(w.labels())},
			"spec":     spec,
		}}
		if err := api.ServerSideApply(t, admin, pod, true); err != nil {
			t.Errorf("a pod of %s %s is refused by admission in namespace %s: %v", w.u.GetKind(), w.u.GetName(), w.u.GetNamespace(), err)
		}
	}
}

// podSpec is the spec of a pod the workload's controller would make: a
// StatefulSet's claim templates become volumes of its claims.
func podSpec(w workload) map[string]any {
	spec := map[string]any{}
	for k, v := range w.spec {
		spec[k] = v
	}
	claims, _, _ := unstructured.NestedSlice(w.u.Object, "spec", "volumeClaimTemplates")
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, c := range claims {
		name, _, _ := unstructured.NestedString(c.(map[string]any), "metadata", "name")
		vols = append(vols, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name + "-" + w.u.GetName() + "-0"}})
	}
	if len(vols) > 0 {
		spec["volumes"] = vols
	}
	return spec
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// operatorCRDs are the Prometheus Operator's CRD manifests named by
// resources (their plural names), from its module.
func operatorCRDs(t *testing.T, resources ...string) []*unstructured.Unstructured {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", prometheusOperator)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", prometheusOperator, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %s (%v)", prometheusOperator, out, err)
	}
	var crds []*unstructured.Unstructured
	for _, r := range resources {
		raw, err := os.ReadFile(filepath.Join(mod.Dir, "example/prometheus-operator-crd", "monitoring.coreos.com_"+r+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crds = append(crds, decode(t, raw)...)
	}
	return crds
}

// refused: the CRDs' schemas reject what users get wrong, with the field.
func refused(t *testing.T, api *kubeapi.Server, admin dynamic.Interface) {
	for _, c := range []struct {
		name, want string
		obj        string
	}{
		{"wrong enum", `spec.auth.mode: Unsupported value: "Password"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"GatewayBackend","metadata":{"name":"bad-enum","namespace":"switchyard"},"spec":{"auth":{"mode":"Password"}}}`},
		{"missing required field", `spec.model: Required value`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceWorkerSet","metadata":{"name":"no-model","namespace":"switchyard"},"spec":{"service":"sim"}}`},
		{"CEL rule", `set service (Kubernetes) or static (fixed addresses)`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceWorkerSet","metadata":{"name":"no-workers","namespace":"switchyard"},"spec":{"model":"m"}}`},
		{"undeclared field", `.spec.replicas: field not declared in schema`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceWorkerSet","metadata":{"name":"extra","namespace":"switchyard"},"spec":{"model":"m","service":"sim","replicas":3}}`},
		{"out of range", `spec.blockSize: Invalid value: 0`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceWorkerSet","metadata":{"name":"zero-block","namespace":"switchyard"},"spec":{"model":"m","service":"sim","blockSize":0}}`},
		{"Bedrock without its settings", `spec.bedrock is required for type Bedrock, and only for type Bedrock`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"no-region","namespace":"switchyard"},"spec":{"type":"Bedrock","baseURL":"https://bedrock-runtime.us-east-1.amazonaws.com","models":[{"name":"m"}]}}`},
		{"Bedrock settings on another type", `spec.bedrock is required for type Bedrock, and only for type Bedrock`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"stray-settings","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","bedrock":{"region":"us-east-1"},"models":[{"name":"m"}]}}`},
		{"Bedrock region", `spec.bedrock.region: Invalid value: "US East"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"bad-region","namespace":"switchyard"},"spec":{"type":"Bedrock","baseURL":"https://bedrock-runtime.us-east-1.amazonaws.com","bedrock":{"region":"US East"},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI without its settings", `spec.azure is required for type AzureOpenAI, and only for type AzureOpenAI`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"no-api-version","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","credentials":{"secretRef":{"name":"azure"}},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI with neither a key nor Entra ID", `type AzureOpenAI needs exactly one of spec.credentials (the resource's API key) or spec.azure.entra`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"no-auth-azure","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21"},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI with a key and Entra ID", `type AzureOpenAI needs exactly one of spec.credentials (the resource's API key) or spec.azure.entra`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"both-azure","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"contoso.onmicrosoft.com","clientID":"app","clientSecretRef":{"name":"app"}}},"credentials":{"secretRef":{"name":"azure"}},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI Entra tenant", `spec.azure.entra.tenantID: Invalid value: "common/x"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"bad-tenant","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"common/x","clientID":"app","clientSecretRef":{"name":"app"}}},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI Entra authority host", `spec.azure.entra.authorityHost: Invalid value: "https://login.microsoftonline.com/contoso"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"bad-authority","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"contoso.onmicrosoft.com","clientID":"app","clientSecretRef":{"name":"app"},"authorityHost":"https://login.microsoftonline.com/contoso"}},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI Entra without a client id", `spec.azure.entra.clientID: Required value`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"no-client","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"contoso.onmicrosoft.com","clientSecretRef":{"name":"app"}}},"models":[{"name":"m"}]}}`},
		{"AzureOpenAI api-version", `spec.azure.apiVersion: Invalid value: "latest"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"bad-api-version","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"latest"},"credentials":{"secretRef":{"name":"azure"}},"models":[{"name":"m"}]}}`},
		{"Databricks settings on another type", `spec.databricks is only for type Databricks`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"stray-databricks","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","databricks":{},"models":[{"name":"m"}]}}`},
		{"Databricks OAuth and a token", `not both`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"both","namespace":"switchyard"},"spec":{"type":"Databricks","baseURL":"https://adb-1.2.azuredatabricks.net/serving-endpoints","databricks":{"oauth":{"clientID":"sp","clientSecretRef":{"name":"sp"}}},"credentials":{"secretRef":{"name":"pat"}},"models":[{"name":"m"}]}}`},
		{"Databricks without credentials", `type Databricks needs spec.credentials (a personal access token) or spec.databricks.oauth`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"no-auth","namespace":"switchyard"},"spec":{"type":"Databricks","baseURL":"https://adb-1.2.azuredatabricks.net/serving-endpoints","models":[{"name":"m"}]}}`},
		{"provider concurrency cap", `spec.maxConcurrency: Invalid value: 0`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"zero-cap","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","maxConcurrency":0,"models":[{"name":"m"}]}}`},
		{"provider breaker failures", `spec.circuitBreaker.failures: Invalid value: 0`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"zero-failures","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","circuitBreaker":{"failures":0},"models":[{"name":"m"}]}}`},
		{"provider breaker openFor", `openFor must be 1s to 1h`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"long-open","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","circuitBreaker":{"openFor":"2h"},"models":[{"name":"m"}]}}`},
		{"provider breaker openFor not a duration", `spec.circuitBreaker.openFor: Invalid value: "soon"`,
			`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"soon-open","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","circuitBreaker":{"openFor":"soon"},"models":[{"name":"m"}]}}`},
		// The namespace's Pod Security label is enforced: what the
		// workloads' pods pass above, a pod without the settings fails.
		{"pod without a restricted security context", `violates PodSecurity "restricted:latest"`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"rooted","namespace":"switchyard"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`},
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(c.obj)); err != nil {
			t.Fatal(err)
		}
		err := api.ServerSideApply(t, admin, u, u.GetKind() == "Pod")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// What the refusals above stop short of is accepted.
	ok := &unstructured.Unstructured{}
	if err := ok.UnmarshalJSON([]byte(`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"bedrock-ok","namespace":"switchyard"},"spec":{"type":"Bedrock","baseURL":"https://bedrock-runtime.us-gov-west-1.amazonaws.com","bedrock":{"region":"us-gov-west-1"},"credentials":{"secretRef":{"name":"aws"}},"models":[{"name":"m","servedName":"anthropic.claude-v2:1"}]}}`)); err != nil {
		t.Fatal(err)
	}
	if err := api.ServerSideApply(t, admin, ok, false); err != nil {
		t.Errorf("a valid Bedrock provider: %v", err)
	}
	for _, obj := range []string{
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"azure-ok","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2025-01-01-preview"},"credentials":{"secretRef":{"name":"azure"}},"models":[{"name":"m","servedName":"gpt-4o-prod"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"azure-entra-ok","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.com","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"72f988bf-86f1-41af-91ab-2d7cd011db47","clientID":"0d6f7c1a-1111-4222-8333-944445555666","clientSecretRef":{"name":"azure-app","key":"clientSecret"}}},"models":[{"name":"m","servedName":"gpt-4o-prod"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"azure-entra-gov-ok","namespace":"switchyard"},"spec":{"type":"AzureOpenAI","baseURL":"https://contoso.openai.azure.us","azure":{"apiVersion":"2024-10-21","entra":{"tenantID":"contoso.onmicrosoft.us","clientID":"app","clientSecretRef":{"name":"azure-app"},"authorityHost":"https://login.microsoftonline.us"}},"models":[{"name":"m"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"databricks-oauth-ok","namespace":"switchyard"},"spec":{"type":"Databricks","baseURL":"https://adb-1.2.azuredatabricks.net/serving-endpoints","databricks":{"oauth":{"clientID":"sp","clientSecretRef":{"name":"sp","key":"clientSecret"}}},"models":[{"name":"m"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"databricks-pat-ok","namespace":"switchyard"},"spec":{"type":"Databricks","baseURL":"https://adb-1.2.azuredatabricks.net/serving-endpoints","credentials":{"secretRef":{"name":"pat"}},"models":[{"name":"m"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"limits-ok","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","maxConcurrency":4,"circuitBreaker":{"failures":2,"openFor":"1m30s"},"models":[{"name":"m"}]}}`,
		`{"apiVersion":"switchyard.dev/v1alpha1","kind":"InferenceProvider","metadata":{"name":"limits-bounds-ok","namespace":"switchyard"},"spec":{"type":"OpenAICompatible","baseURL":"https://api.openai.com/v1","maxConcurrency":1,"circuitBreaker":{"failures":1000,"openFor":"1h"},"models":[{"name":"m"}]}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(obj)); err != nil {
			t.Fatal(err)
		}
		if err := api.ServerSideApply(t, admin, u, false); err != nil {
			t.Errorf("a valid %s: %v", u.GetName(), err)
		}
	}
}

// policydAsServiceAccount runs policyd with the token the kubelet would
// mount for its ServiceAccount (the dev overlay is applied): it follows
// the overlay's GatewayBackend and InferenceWorkerSet and writes their
// Accepted conditions, and the API server forbids it what its
// ClusterRole does not grant.
func policydAsServiceAccount(t *testing.T, api *kubeapi.Server, admin dynamic.Interface) {
	ctx := context.Background()
	// policyd's snapshot is all or nothing: the production overlay's
	// backend (whose key Secret nobody made) and the examples would decide
	// it. The namespace's resources go; without a namespace controller,
	// deleting the namespace would not.
	for _, kind := range v1alpha1.Kinds {
		if err := admin.Resource(v1alpha1.Resources[kind]).Namespace("inference").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	token := api.ServiceAccountToken(t, "switchyard", "policyd")
	as, err := dynamic.NewForConfig(api.TokenConfig(token))
	if err != nil {
		t.Fatal(err)
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "secrets"},
		{Version: "v1", Resource: "pods"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		_, err := as.Resource(gvr).Namespace("switchyard").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("policyd's service account lists %s: %v, want forbidden", gvr.Resource, err)
		}
	}
	_, err = as.Resource(v1alpha1.Resources[v1alpha1.KindGatewayBackend]).Namespace("switchyard").Patch(ctx, "dev",
		"application/merge-patch+json", []byte(`{"spec":{"models":[{"name":"other"}]}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("policyd's service account edits a GatewayBackend's spec: %v, want forbidden", err)
	}

	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Source, cfg.Debounce = policyd.SourceKubernetes, 20*time.Millisecond
	cfg.Kubeconfig = api.TokenKubeconfig(t, "policyd", token)
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	src, err := kube.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := policyd.NewWithSource(cfg, src, log)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, srv.Serve)
	for _, r := range []struct{ kind, name string }{
		{v1alpha1.KindGatewayBackend, "dev"},
		{v1alpha1.KindInferenceWorkerSet, "sim"},
	} {
		testkit.Eventually(t, 20*time.Second, r.kind+" "+r.name+" Accepted by policyd", func() bool {
			u, err := admin.Resource(v1alpha1.Resources[r.kind]).Namespace("switchyard").Get(ctx, r.name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				if m["type"] == v1alpha1.ConditionAccepted && m["status"] == "True" {
					return true
				}
			}
			return false
		})
	}
}
