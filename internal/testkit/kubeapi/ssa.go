package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FieldManager is the field manager of the test's server-side applies.
const FieldManager = "switchyard-test"

// Warnings collects the warnings the API server sends back (Pod Security
// admission warns about a workload whose pods it would refuse).
type Warnings struct {
	mu  sync.Mutex
	got []string
}

// HandleWarningHeader implements rest.WarningHandler.
func (w *Warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// Take returns the warnings since the last call and forgets them.
func (w *Warnings) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	got := w.got
	w.got = nil
	return got
}

// AdminClient is a dynamic client for Admin whose warnings go to w.
func (s *Server) AdminClient(tb testing.TB, w rest.WarningHandler) *dynamic.DynamicClient {
	tb.Helper()
	cfg := s.Config(Admin)
	cfg.WarningHandler = w
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// ResourceFor is the client of u's kind in u's namespace (or cluster-wide
// for a cluster-scoped kind), and whether the kind is namespaced.
func (s *Server) ResourceFor(tb testing.TB, c dynamic.Interface, gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, bool) {
	tb.Helper()
	m := s.mapping(tb, gvk)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.Resource(m.Resource).Namespace(namespace), true
	}
	return c.Resource(m.Resource), false
}

// ServerSideApply applies u with server-side apply, as `kubectl apply
// --server-side` does, with strict field validation: a field the schema
// does not declare is an error, not silently dropped. dryRun sends it
// through admission and validation without storing it.
func (s *Server) ServerSideApply(tb testing.TB, c dynamic.Interface, u *unstructured.Unstructured, dryRun bool) error {
	tb.Helper()
	rc, namespaced := s.ResourceFor(tb, c, u.GroupVersionKind(), u.GetNamespace())
	if namespaced && u.GetNamespace() == "" {
		return fmt.Errorf("%s %s: namespaced, but names no namespace", u.GetKind(), u.GetName())
	}
	body, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = rc.Patch(context.Background(), u.GetName(), types.ApplyPatchType, body, opts)
	return err
}

// WaitEstablished waits until the CustomResourceDefinition name is
// established, so objects of its kind can be created.
func (s *Server) WaitEstablished(tb testing.TB, name string) {
	tb.Helper()
	s.waitEstablished(tb, name)
	s.mapper.Reset()
}

// ServiceAccountToken is a token for service account namespace/name from
// the TokenRequest API, as the kubelet mounts into a pod.
func (s *Server) ServiceAccountToken(tb testing.TB, namespace, name string) string {
	tb.Helper()
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"expirationSeconds": int64(3600)},
	}}
	out, err := s.admin.Resource(gvr).Namespace(namespace).Create(context.Background(), req, metav1.CreateOptions{}, "token")
	if err != nil {
		tb.Fatalf("token for service account %s/%s: %v", namespace, name, err)
	}
	var tr authenticationv1.TokenRequest
	raw, _ := json.Marshal(out.Object)
	if err := json.Unmarshal(raw, &tr); err != nil || tr.Status.Token == "" {
		tb.Fatalf("token for service account %s/%s: no token in %s (%v)", namespace, name, raw, err)
	}
	return tr.Status.Token
}

// TokenConfig is a client configuration presenting token.
func (s *Server) TokenConfig(token string) *rest.Config {
	cfg := s.Config(Admin)
	cfg.BearerToken = token
	return cfg
}

// TokenKubeconfig writes a kubeconfig file presenting token and returns
// its path.
func (s *Server) TokenKubeconfig(tb testing.TB, name, token string) string {
	tb.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthority: s.caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	cfg.CurrentContext = "test"
	path := filepath.Join(s.dir, "kubeconfig-token-"+name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

func ptr[T any](v T) *T { return &v }
