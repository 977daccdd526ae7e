package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/kubeapi"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

const deployDir = "../../../deploy"

// docs decodes the YAML documents of a file under deploy/, keeping those
// whose kind is one of kinds (all when none is given).
func docs(t *testing.T, file string, kinds ...string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, file))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 && (len(kinds) == 0 || strings.Contains(strings.Join(kinds, ","), u.GetKind())) {
			out = append(out, u)
		}
	}
}

// toUser makes a binding's subjects the test's user instead of policyd's
// service account: the API server authenticates the test by a token.
func toUser(b *unstructured.Unstructured, user string) *unstructured.Unstructured {
	_ = unstructured.SetNestedSlice(b.Object, []any{map[string]any{
		"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user,
	}}, "subjects")
	return b
}

// installCRDs installs the CRDs as generated into deploy/ and the
// namespace inference.
func installCRDs(t *testing.T, api *kubeapi.Server) {
	t.Helper()
	crds, err := filepath.Glob(filepath.Join(deployDir, "kustomize/base/crds/*.yaml"))
	if err != nil || len(crds) != len(v1alpha1.Kinds) {
		t.Fatalf("CRD manifests %v (%v), want %d", crds, err, len(v1alpha1.Kinds))
	}
	for _, f := range crds {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		api.Apply(t, "", raw)
	}
	api.Apply(t, "", []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: inference}\n"))
}

// grantPolicyd gives user policyd's permissions: the base's ClusterRole,
// nothing more. It returns once the server enforces them (its RBAC
// follows the bindings through a cache, a moment behind).
func grantPolicyd(t *testing.T, api *kubeapi.Server, user string) {
	t.Helper()
	for _, u := range docs(t, "kustomize/base/policyd.yaml", "ClusterRole", "ClusterRoleBinding") {
		if u.GetKind() == "ClusterRoleBinding" {
			toUser(u, user)
		}
		api.ApplyObject(t, "", u)
	}
	client := api.Dynamic(t, user)
	testkit.Eventually(t, 20*time.Second, user+"'s ClusterRole in force", func() bool {
		for _, gvr := range watched() {
			_, err := client.Resource(gvr).Namespace("inference").List(context.Background(), metav1.ListOptions{Limit: 1})
			if apierrors.IsForbidden(err) {
				return false
			}
		}
		return true
	})
}

// apiEnv is policyd in Kubernetes mode against a real API server.
type apiEnv struct {
	t     *testing.T
	api   *kubeapi.Server
	admin *dynamic.DynamicClient
	srv   *policyd.Server
}

// accepted is a resource's Accepted condition (nil when absent) and its
// generation.
func (e *apiEnv) accepted(kind, name string) (*metav1.Condition, int64) {
	u := getResource(e.t, e.admin, kind, name)
	return acceptedOf(e.t, u), u.GetGeneration()
}

// waitAccepted waits for a resource's Accepted condition to have status
// and reason for its current generation.
func (e *apiEnv) waitAccepted(kind, name string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, gen := e.accepted(kind, name)
		if c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == gen {
			return c
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s %s: Accepted %+v at generation %d after 20s, want %s %s", kind, name, c, gen, status, reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *apiEnv) tenantOf(key string) string {
	snap, _ := e.srv.Snapshot()
	if snap == nil || snap.Program("front") == nil {
		return ""
	}
	tenant, _ := snap.Program("front").KeyTenant(sha256.Sum256([]byte(key)))
	return tenant
}

// Against a real kube-apiserver (internal/testkit/kubeapi): the CRDs as
// generated install, and the API server enforces their validation with
// field paths; policyd, with only the permissions the deploy manifests
// grant, follows the resources and writes their status through the status
// subresource; a tenant's key Secret is refused with a message naming the
// missing permission until deploy/rbac's Role grants it, then served; a
// key removed from the Secret, and the deleted Secret, stop naming the
// tenant within the re-read interval, with no restart.
func TestAgainstAPIServer(t *testing.T) {
	api := kubeapi.Start(t, "policyd")
	installCRDs(t, api)
	e := &apiEnv{t: t, api: api, admin: api.Dynamic(t, kubeapi.Admin)}

	// The API server checks the CRD's schema before policyd sees anything.
	bad := keyedBackend()
	bad.SetName("bad")
	_ = unstructured.SetNestedSlice(bad.Object, []any{map[string]any{"name": "team-a", "keysSecret": "team-a-keys", "weight": int64(0)}}, "spec", "tenants")
	_, err := e.admin.Resource(v1alpha1.Resources[v1alpha1.KindGatewayBackend]).Namespace("inference").Create(context.Background(), bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.tenants[0].weight") {
		t.Fatalf("a tenant of weight 0: %v, want the API server to refuse it naming spec.tenants[0].weight", err)
	}

	// policyd's permissions are the base's ClusterRole, nothing more.
	grantPolicyd(t, api, "policyd")
	// The dev catalog, as readManifests reads it for the fake's tests.
	kinds := readManifests(t)
	for _, u := range kinds {
		unstructured.RemoveNestedField(u.Object, "metadata", "generation")
		api.ApplyObject(t, "inference", u)
	}
	k1, k2 := apikey.Generate(), apikey.Generate()
	front := keyedBackend()
	unstructured.RemoveNestedField(front.Object, "metadata", "generation")
	api.ApplyObject(t, "inference", front)
	api.ApplyObject(t, "inference", keySecret("team-a-keys", k1, k2))

	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Source, cfg.Debounce, cfg.Namespace = policyd.SourceKubernetes, 20*time.Millisecond, "inference"
	cfg.Kubeconfig, cfg.KeySecretsInterval = api.Kubeconfig(t, "policyd"), 200*time.Millisecond
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	}
	src, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	e.srv, err = policyd.NewWithSource(cfg, src, log)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, e.srv.Serve)

	// Without the Role for key Secrets the keyed backend is refused, and
	// says what is missing; the snapshot is all or nothing, so the rest
	// wait on it.
	c := e.waitAccepted(v1alpha1.KindGatewayBackend, "front", metav1.ConditionFalse, v1alpha1.ReasonInvalid)
	if !strings.Contains(c.Message, "Secret inference/team-a-keys: forbidden: policyd's service account needs get on this Secret") {
		t.Errorf("condition message %q", c.Message)
	}
	e.waitAccepted(v1alpha1.KindGatewayBackend, "dev", metav1.ConditionFalse, ReasonBlocked)

	// deploy/rbac's Role grants get on that Secret by name: within the
	// re-read interval everything is accepted and both keys are served.
	for _, u := range docs(t, "rbac/policyd-key-secrets.yaml") {
		if u.GetKind() == "RoleBinding" {
			toUser(u, "policyd")
		}
		api.ApplyObject(t, "inference", u)
	}
	for _, u := range append(kinds, front) {
		e.waitAccepted(u.GetKind(), u.GetName(), metav1.ConditionTrue, v1alpha1.ReasonAccepted)
	}
	testkit.Eventually(t, 10*time.Second, "both keys served", func() bool { return e.tenantOf(k1) == "team-a" && e.tenantOf(k2) == "team-a" })
	if n, _, _ := unstructured.NestedInt64(getResource(t, e.admin, v1alpha1.KindInferenceWorkerSet, "qwen-workers").Object, "status", "endpoints"); n != 2 {
		t.Errorf("status.endpoints %d, want 2", n)
	}

	// Revoke k2 by editing the Secret, as `yardctl keys revoke`'s patch
	// does; then delete the Secret.
	secrets := e.admin.Resource(secretsGVR).Namespace("inference")
	revoked := time.Now()
	api.ApplyObject(t, "inference", keySecret("team-a-keys", k1))
	testkit.Eventually(t, 10*time.Second, "k2 revoked", func() bool { return e.tenantOf(k2) == "" })
	t.Logf("a key removed from its Secret left the snapshot after %s (re-read interval %s)", time.Since(revoked).Round(time.Millisecond), cfg.KeySecretsInterval)
	if e.tenantOf(k1) != "team-a" {
		t.Fatal("revoking k2 revoked k1")
	}
	if err := secrets.Delete(context.Background(), "team-a-keys", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the deleted Secret's keys revoked", func() bool { return e.tenantOf(k1) == "" })

	// policyd may read only the Secret its Role names: another is
	// forbidden, which the API server, not the test, decides.
	if _, err := api.Dynamic(t, "policyd").Resource(secretsGVR).Namespace("inference").Get(context.Background(), "other", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("policyd reading a Secret its Role does not name: %v, want forbidden", err)
	}
}
