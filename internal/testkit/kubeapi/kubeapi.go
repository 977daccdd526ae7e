// Package kubeapi runs a real Kubernetes API server for tests: etcd and
// kube-apiserver as processes of the test's own, on loopback ports, with
// RBAC on and a static bearer token per user — what controller-runtime's
// envtest does, without its binary download (which cannot work here). The
// binaries are built from source through the Go module proxy by
// `make kube-bins` (scripts/kube-bins.sh, versions pinned in
// tools/kube/go.mod) into bin/kube, which `make test` runs first.
//
// Why a real server and not client-go's fakes: the fakes accept any
// object, know nothing of a CRD's schema, its status subresource or
// RBAC, and answer a watch however the test arranged. The things that
// break in a cluster — a CRD the server refuses, a status written to the
// wrong subresource, a permission the manifests forgot — only a real API
// server finds.
//
// A user is named by Start; Admin is in system:masters, every other user
// has no group and may do only what RBAC objects the test applies grant
// it (bind them to the user by name: kind User).
package kubeapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// Admin is the user in system:masters.
const Admin = "admin"

// BinDirEnv names the directory holding kube-apiserver and etcd; by
// default bin/kube of the repository.
const BinDirEnv = "SWITCHYARD_KUBE_BIN"

// Server is a running API server.
type Server struct {
	// URL is the API server's https address.
	URL string

	dir    string
	caFile string
	tokens map[string]string
	mapper *restmapper.DeferredDiscoveryRESTMapper
	admin  *dynamic.DynamicClient
}

// Start runs etcd and kube-apiserver until the test ends, with a bearer
// token for Admin and for each of users, and waits until the server is
// ready. With -short it skips the test (an end-to-end run); without the
// binaries it fails, naming the make target that builds them.
func Start(tb testing.TB, users ...string) *Server {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: skips the tests against a real Kubernetes API server")
	}
	bins := binDir(tb)
	dir := tb.TempDir()
	s := &Server{dir: dir, tokens: map[string]string{}}

	etcdPort, peerPort := testkit.FreePort(tb), testkit.FreePort(tb)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	etcdDone := start(tb, dir, "etcd", filepath.Join(bins, "etcd"),
		"--name=test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=test="+peerURL, "--unsafe-no-fsync", "--log-level=warn")

	var tokens strings.Builder
	for i, u := range append([]string{Admin}, users...) {
		s.tokens[u] = randomToken(tb)
		groups := ""
		if u == Admin {
			groups = "system:masters"
		}
		fmt.Fprintf(&tokens, "%s,%s,%d,%q\n", s.tokens[u], u, i+1, groups)
	}
	tokenFile := write(tb, dir, "tokens.csv", []byte(tokens.String()))
	saKey, saPub := serviceAccountKeys(tb, dir)
	certDir := filepath.Join(dir, "certs")
	port := testkit.FreePort(tb)
	s.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	apiDone := start(tb, dir, "kube-apiserver", filepath.Join(bins, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--cert-dir="+certDir,
		"--token-auth-file="+tokenFile, "--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		// The kubernetes Service's endpoint would be the advertise
		// address, which may not be loopback: there is no Service here.
		"--endpoint-reconciler-type=none",
		"--v=0")
	s.caFile = filepath.Join(certDir, "apiserver.crt")
	s.waitReady(tb, map[string]<-chan struct{}{"etcd": etcdDone, "kube-apiserver": apiDone})
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config(Admin))
	if err != nil {
		tb.Fatal(err)
	}
	s.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	s.admin = s.Dynamic(tb, Admin)
	return s
}

// binDir is where the binaries are, or the test fails.
func binDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv(BinDirEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			tb.Fatalf("kubeapi: %v (or set %s)", err, BinDirEnv)
		}
		dir = filepath.Join(root, "bin", "kube")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			tb.Fatalf("kubeapi: %s not built in %s: run `make kube-bins` (make test does) or set %s", b, dir, BinDirEnv)
		}
	}
	return dir
}

// repoRoot is the nearest directory above the working directory holding
// go.work (the repository's root).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work above the working directory")
		}
		dir = parent
	}
}

// start runs a process until the test ends; its output goes to a log file
// printed when the test fails. The channel is closed when it exits.
func start(tb testing.TB, dir, name, bin string, args ...string) <-chan struct{} {
	tb.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if tb.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 8<<10 {
				out = out[len(out)-8<<10:]
			}
			tb.Logf("%s's log (tail):\n%s", name, out)
		}
	})
	return exited
}

// waitReady waits for /readyz, up to a minute: the server starts in a few
// seconds, its post-start hooks (RBAC's bootstrap roles) a few more. A
// process that exits meanwhile fails the test at once.
func (s *Server) waitReady(tb testing.TB, procs map[string]<-chan struct{}) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		for name, done := range procs {
			select {
			case <-done:
				tb.Fatalf("%s exited while the API server started (its log follows)", name)
			default:
			}
		}
		if _, err := os.Stat(s.caFile); err == nil {
			last = s.readyz()
			if last == nil {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("kube-apiserver at %s not ready after a minute: %v", s.URL, last)
}

func (s *Server) readyz() error {
	rt, err := rest.TransportFor(s.Config(Admin))
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 2 * time.Second}).Get(s.URL + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// Config is a client configuration for user.
func (s *Server) Config(user string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     s.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAFile: s.caFile},
		QPS:             -1, // no client-side throttling in tests
	}
}

// Dynamic is a dynamic client for user.
func (s *Server) Dynamic(tb testing.TB, user string) *dynamic.DynamicClient {
	tb.Helper()
	c, err := dynamic.NewForConfig(s.Config(user))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Kubeconfig writes a kubeconfig file for user and returns its path.
func (s *Server) Kubeconfig(tb testing.TB, user string) string {
	tb.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthority: s.caFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: s.tokens[user]}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: user}
	cfg.CurrentContext = "test"
	path := filepath.Join(s.dir, "kubeconfig-"+user)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Apply creates (or, when they exist, updates) every object of the YAML
// documents as Admin, in order, in namespace ns for namespaced kinds that
// name none. A CustomResourceDefinition is waited for until it is
// established, so objects of its kind may follow it.
func (s *Server) Apply(tb testing.TB, ns string, docs ...[]byte) {
	tb.Helper()
	for _, doc := range docs {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				tb.Fatalf("apply: %v", err)
			}
			if len(obj) == 0 {
				continue
			}
			s.ApplyObject(tb, ns, &unstructured.Unstructured{Object: obj})
		}
	}
}

// ApplyObject creates or updates u as Admin (see Apply).
func (s *Server) ApplyObject(tb testing.TB, ns string, u *unstructured.Unstructured) {
	tb.Helper()
	m := s.mapping(tb, u.GroupVersionKind())
	var rc dynamic.ResourceInterface = s.admin.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		rc = s.admin.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	ctx := context.Background()
	_, err := rc.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *unstructured.Unstructured
		if cur, err = rc.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = rc.Update(ctx, u, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		tb.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	if u.GetKind() == "CustomResourceDefinition" {
		s.waitEstablished(tb, u.GetName())
	}
}

// Resource is the resource of kind gvk, as the server serves it.
func (s *Server) Resource(tb testing.TB, gvk schema.GroupVersionKind) schema.GroupVersionResource {
	tb.Helper()
	return s.mapping(tb, gvk).Resource
}

func (s *Server) mapping(tb testing.TB, gvk schema.GroupVersionKind) *meta.RESTMapping {
	tb.Helper()
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset() // a CRD applied since the last discovery
		m, err = s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		tb.Fatalf("kind %s: %v", gvk, err)
	}
	return m
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func (s *Server) waitEstablished(tb testing.TB, name string) {
	tb.Helper()
	testkit.Eventually(tb, 30*time.Second, "CRD "+name+" established", func() bool {
		crd, err := s.admin.Resource(crdGVR).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
	s.mapper.Reset()
}

func randomToken(tb testing.TB) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// serviceAccountKeys writes the key pair the API server signs service
// account tokens with (it will not start without one).
func serviceAccountKeys(tb testing.TB, dir string) (keyFile, pubFile string) {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyFile = write(tb, dir, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	pubFile = write(tb, dir, "sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
	return keyFile, pubFile
}

func write(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
