package kube

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/kubeapi"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// registerOnce registers the source with policyd as the binary does
// (cmd/switchyard/kube.go), for tests that run policyd.Run.
var registerOnce sync.Once

func registerSource() {
	registerOnce.Do(func() { policyd.RegisterSource(policyd.SourceKubernetes, New) })
}

// kubeConfig is policyd's configuration in Kubernetes mode on loopback
// ports, with kubeconfig.
func kubeConfig(kubeconfig string) policyd.Config {
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Source, cfg.Debounce, cfg.Namespace = policyd.SourceKubernetes, 20*time.Millisecond, "inference"
	cfg.Kubeconfig, cfg.KeySecretsInterval = kubeconfig, 200*time.Millisecond
	cfg.DrainDelay, cfg.ShutdownTimeout = 0, 5*time.Second
	return cfg
}

// withToken rewrites a kubeconfig's credentials to token.
func withToken(t *testing.T, kubeconfig, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Token = token
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPolicyd runs policyd.Run as `switchyard policyd` does, with its log
// in buf, until it returns or, with untilServing, until it says it is
// serving and the test cancels it. It returns Run's error.
func runPolicyd(t *testing.T, cfg policyd.Config, buf *testkit.SyncBuffer, untilServing bool) error {
	t.Helper()
	registerSource()
	t.Cleanup(klog.ClearLogger)
	log := zerolog.New(buf).With().Str("service", "policyd").Logger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- policyd.Run(ctx, cfg, log) }()
	var serving <-chan time.Time
	if untilServing {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		serving = tick.C
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-serving:
			if strings.Contains(buf.String(), `"policyd serving"`) {
				cancel()
			}
		case <-timeout:
			t.Fatal("policyd.Run neither served nor returned within 30s")
		}
	}
}

// messages are the log's messages in order; every line must be JSON.
func messages(t *testing.T, log string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		msg, _ := m["message"].(string)
		out = append(out, msg)
	}
	return out
}

// Against a real API server: a client that cannot follow the resources
// fails policyd before anything says it is serving, with the reason —
// the CRDs not installed, credentials refused, RBAC missing — and one
// that can gets a "kubernetes API server reached" before "policyd
// serving".
func TestStartupChecks(t *testing.T) {
	api := kubeapi.Start(t, "policyd")
	admin := api.Kubeconfig(t, kubeapi.Admin)
	// What the server refuses is tried again for the startup timeout (a
	// Deployment may start before its CRDs and RBAC take effect).
	shortStartup(t, time.Second, 100*time.Millisecond)

	_, err := New(kubeConfig(admin), zerolog.Nop())
	for _, kind := range v1alpha1.Kinds {
		want := resourceName(v1alpha1.Resources[kind]) + ": not served by " + api.URL + ": install the CRDs (deploy/kustomize/base/crds)"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without the CRDs: %v, want %q", err, want)
		}
	}
	t.Logf("without the CRDs: %v", err)
	installCRDs(t, api)

	_, err = New(kubeConfig(withToken(t, admin, "not-a-token")), zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("a wrong token: %v, want the credentials refused", err)
	}

	// policyd's user before the ClusterRole is bound: every resource is
	// forbidden, and Run says so without saying it serves.
	var buf testkit.SyncBuffer
	err = runPolicyd(t, kubeConfig(api.Kubeconfig(t, "policyd")), &buf, false)
	for _, gvr := range watched() {
		want := `User "policyd" cannot list resource "` + gvr.Resource + `"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without RBAC: %v, want %q", err, want)
		}
	}
	t.Logf("without RBAC: %v", err)
	if err != nil && !strings.Contains(err.Error(), "policyd needs the ClusterRole of deploy/kustomize/base/policyd.yaml") {
		t.Errorf("without RBAC: %v, want it to name the ClusterRole", err)
	}
	for _, m := range messages(t, buf.String()) {
		if strings.Contains(m, "serving") {
			t.Errorf("policyd logged %q though it could not list the resources", m)
		}
	}

	grantPolicyd(t, api, "policyd")
	buf = testkit.SyncBuffer{}
	if err := runPolicyd(t, kubeConfig(api.Kubeconfig(t, "policyd")), &buf, true); err != nil {
		t.Fatalf("with RBAC: %v", err)
	}
	msgs := strings.Join(messages(t, buf.String()), "\n")
	reached, serving := strings.Index(msgs, "kubernetes API server reached"), strings.Index(msgs, "policyd serving")
	if reached < 0 || serving < reached {
		t.Errorf("log messages:\n%s\nwant the API server reached before policyd serving", msgs)
	}
}
