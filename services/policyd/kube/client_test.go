package kube

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// writeKubeconfig writes a kubeconfig naming server and returns its path.
func writeKubeconfig(t *testing.T, name, server string) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "token-" + name}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	path := filepath.Join(t.TempDir(), name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// noCluster makes the environment one with no kubeconfig and outside a
// pod; home is what ~/.kube/config is for the test.
func noCluster(t *testing.T, home string) {
	t.Setenv(clientcmd.RecommendedConfigPathEnvVar, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	old := homeKubeconfig
	homeKubeconfig = home
	t.Cleanup(func() { homeKubeconfig = old })
}

// TestRestConfigChoice: --kubeconfig wins; else $KUBECONFIG (a list,
// merged); else ~/.kube/config; with none, and outside a pod, the error
// names what was tried and what to set, not client-go's "no
// configuration has been provided".
func TestRestConfigChoice(t *testing.T) {
	a := writeKubeconfig(t, "a", "https://a.example:6443")
	b := writeKubeconfig(t, "b", "https://b.example:6443")
	missing := filepath.Join(t.TempDir(), "missing")

	for _, tc := range []struct {
		name, flag, env, home string
		host, origin          string
	}{
		{name: "KUBECONFIG", env: a, home: b, host: "https://a.example:6443", origin: a},
		{name: "KUBECONFIG list, a missing file skipped", env: missing + string(filepath.ListSeparator) + b, home: a, host: "https://b.example:6443", origin: b},
		{name: "flag over KUBECONFIG", flag: b, env: a, home: a, host: "https://b.example:6443", origin: b},
		{name: "home", home: b, host: "https://b.example:6443", origin: b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noCluster(t, tc.home)
			t.Setenv(clientcmd.RecommendedConfigPathEnvVar, tc.env)
			rc, origin, err := restConfig(tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != tc.host || origin != tc.origin {
				t.Errorf("server %s from %s, want %s from %s", rc.Host, origin, tc.host, tc.origin)
			}
		})
	}

	t.Run("none", func(t *testing.T) {
		noCluster(t, missing)
		_, _, err := restConfig("")
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"--kubeconfig is not set", "$KUBECONFIG is not set", missing + " does not exist", "not in a pod", "set --kubeconfig (or SWITCHYARD_KUBECONFIG) or $KUBECONFIG"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "no configuration has been provided") {
			t.Errorf("error %q is client-go's", err)
		}
	})
	t.Run("flag names a missing file", func(t *testing.T) {
		noCluster(t, a)
		_, _, err := restConfig(missing)
		if err == nil || !strings.HasPrefix(err.Error(), "kubeconfig: "+missing) {
			t.Fatalf("error %v, want one naming --kubeconfig's file", err)
		}
	})
	t.Run("KUBECONFIG names only missing files", func(t *testing.T) {
		noCluster(t, a)
		t.Setenv(clientcmd.RecommendedConfigPathEnvVar, missing)
		_, _, err := restConfig("")
		if err == nil || !strings.Contains(err.Error(), "$KUBECONFIG ("+missing+") names no usable file") {
			t.Fatalf("error %v, want one naming $KUBECONFIG", err)
		}
	})
}

// shortStartup bounds New's startup check for the test.
func shortStartup(t *testing.T, timeout, retry time.Duration) {
	oldTimeout, oldRetry := startupTimeout, startupRetry
	startupTimeout, startupRetry = timeout, retry
	t.Cleanup(func() { startupTimeout, startupRetry = oldTimeout, oldRetry })
}

// TestNewUnreachable: a server that does not answer fails New within the
// startup timeout, naming the server and where its address came from.
func TestNewUnreachable(t *testing.T) {
	server := "https://127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	noCluster(t, filepath.Join(t.TempDir(), "missing"))
	t.Setenv(clientcmd.RecommendedConfigPathEnvVar, writeKubeconfig(t, "down", server))
	shortStartup(t, 500*time.Millisecond, 50*time.Millisecond)
	t.Cleanup(klog.ClearLogger)

	cfg := policyd.DefaultConfig()
	cfg.Source = policyd.SourceKubernetes
	start := time.Now()
	_, err := New(cfg, zerolog.Nop())
	if err == nil {
		t.Fatal("New succeeded against a closed port")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("New took %s, want about the startup timeout", took)
	}
	for _, want := range []string{server, "not reachable within 500ms", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestKlogIntoServiceLog: after routeKlog, klog's lines (client-go's),
// plain and structured, are JSON objects of the service's log with its
// fields, at the level they were logged at; klog's debugging stays out.
func TestKlogIntoServiceLog(t *testing.T) {
	var buf testkit.SyncBuffer
	routeKlog(zerolog.New(&buf).With().Str("service", "policyd").Logger())
	t.Cleanup(klog.ClearLogger)

	klog.Info("plain line")
	klog.Warningf("warning %d", 2)
	klog.ErrorS(errors.New("boom"), "watch failed", "resource", "inferencepolicies", "object", klog.KRef("inference", "p1"))
	klog.V(4).Info("debugging")
	klog.Background().WithName("reflector").WithValues("type", "x").Info("contextual")
	klog.Flush()

	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["service"] != "policyd" || m["from"] != "klog" {
			t.Errorf("line %v lacks the service's fields", m)
		}
		lines = append(lines, m)
	}
	want := []struct{ level, msg string }{
		{"info", "plain line"}, {"info", "warning 2"}, {"error", "watch failed"}, {"info", "contextual"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		if lines[i]["level"] != w.level || lines[i]["message"] != w.msg {
			t.Errorf("line %d: %v, want level %s message %q", i, lines[i], w.level, w.msg)
		}
	}
	if e := lines[2]; e["error"] != "boom" || e["resource"] != "inferencepolicies" || fmt.Sprint(e["object"]) != "map[name:p1 namespace:inference]" {
		t.Errorf("structured line %v, want its error and values as fields", e)
	}
	if c := lines[3]; c["logger"] != "reflector" || c["type"] != "x" {
		t.Errorf("contextual line %v, want its name and values", c)
	}
}
