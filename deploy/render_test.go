package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/switchyard-dev/switchyard/internal/flagenv"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/services/gateway"
	"github.com/switchyard-dev/switchyard/services/kvtracker"
	"github.com/switchyard-dev/switchyard/services/meter"
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/router"
)

// set is one installable combination of the manifests: an overlay, or
// the base with components.
type set struct {
	name string
	// dir is an overlay's directory; empty for base + components.
	dir        string
	components []string
	// provided are the Secrets and PersistentVolumeClaims the set expects
	// the operator to create (its documentation says so); anything else a
	// pod needs must be in the set.
	provided []string
}

// sets is every overlay, the base alone and the base with each component.
var sets = []set{
	{name: "overlays/dev", dir: "kustomize/overlays/dev"},
	{name: "overlays/production", dir: "kustomize/overlays/production",
		provided: []string{"Secret/switchyard-deps", "Secret/switchyard-meter-token", "Secret/team-a-keys", "PersistentVolumeClaim/switchyard-tokenizers"}},
	{name: "overlays/mtls", dir: "kustomize/overlays/mtls", provided: append(mtlsSecrets, "Secret/switchyard-meter-token")},
	{name: "base", provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+nats", components: []string{"nats"}, provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+redis", components: []string{"redis"}, provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+sim-fleet", components: []string{"sim-fleet"}, provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+monitoring", components: []string{"monitoring"}, provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+autoscaling", components: []string{"autoscaling", "autoscaling-streams"}, provided: []string{"Secret/switchyard-meter-token"}},
	{name: "base+mtls", components: []string{"mtls"}, provided: append(mtlsSecrets, "Secret/switchyard-meter-token")},
}

var mtlsSecrets = []string{
	"Secret/switchyard-router-tls", "Secret/switchyard-policyd-tls", "Secret/switchyard-gateway-tls",
	"Secret/switchyard-kvtracker-tls", "Secret/switchyard-meter-tls", "Secret/switchyard-operator-token",
}

// render builds the set with kustomize (the library kubectl embeds) and
// decodes its objects.
func render(t *testing.T, s set) []*unstructured.Unstructured {
	t.Helper()
	dir := s.dir
	if dir == "" {
		abs, err := filepath.Abs("kustomize")
		if err != nil {
			t.Fatal(err)
		}
		dir = t.TempDir()
		// kustomize takes relative paths only.
		rel, err := filepath.Rel(dir, abs)
		if err != nil {
			t.Fatal(err)
		}
		var k strings.Builder
		// As an overlay adding components must (deploy/README.md): the
		// namespace and the image again, for the components' objects.
		fmt.Fprintf(&k, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: switchyard\n"+
			"images: [{name: switchyard, newName: ghcr.io/switchyard-dev/switchyard, newTag: test}]\nresources: [%q]\ncomponents:\n", filepath.Join(rel, "base"))
		for _, c := range s.components {
			fmt.Fprintf(&k, "  - %q\n", filepath.Join(rel, "components", c))
		}
		if len(s.components) == 0 {
			k.WriteString("  []\n")
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", s.name, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		// Through JSON and unstructured's own decoder, so numbers are
		// int64 as the API machinery's accessors expect.
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
}

// TestManifests renders every set and checks what each promises. An error
// names the set, the object and the field.
func TestManifests(t *testing.T) {
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			objs := render(t, s)
			if len(objs) == 0 {
				t.Fatal("renders nothing")
			}
			for _, err := range check(objs, s.provided) {
				t.Error(err)
			}
		})
	}
}

// TestChecksFail shows that the checks find what they look for: each
// mutation of the dev overlay breaks one rule.
func TestChecksFail(t *testing.T) {
	for _, c := range []struct {
		name, want string
		mutate     func(objs []*unstructured.Unstructured)
	}{
		{"no namespace", "names no namespace", func(objs []*unstructured.Unstructured) {
			find(objs, "StatefulSet", "sim").SetNamespace("")
		}},
		{"image not rewritten", "image \"switchyard\"", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "StatefulSet", "sim"), "image", "switchyard")
		}},
		{"writable root", "readOnlyRootFilesystem", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "Deployment", "router"), "securityContext", map[string]any{"readOnlyRootFilesystem": false})
		}},
		{"unknown setting", "SWITCHYARD_ROUTER_ADRESS", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "Deployment", "gateway"), "env", []any{map[string]any{"name": "SWITCHYARD_ROUTER_ADRESS", "value": "x"}})
		}},
		{"bad value", "SWITCHYARD_SHUTDOWN_TIMEOUT", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "Deployment", "gateway"), "env", []any{map[string]any{"name": "SWITCHYARD_SHUTDOWN_TIMEOUT", "value": "soon"}})
		}},
		{"short grace", "terminationGracePeriodSeconds", func(objs []*unstructured.Unstructured) {
			_ = unstructured.SetNestedField(find(objs, "Deployment", "gateway").Object, int64(20), "spec", "template", "spec", "terminationGracePeriodSeconds")
		}},
		{"missing secret", "Secret/switchyard-meter-token", func(objs []*unstructured.Unstructured) {
			for i, u := range objs {
				if u.GetKind() == "Secret" && u.GetName() == "switchyard-meter-token" {
					objs[i] = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "gone", "namespace": "switchyard"}}}
				}
			}
		}},
		{"service selects nothing", "selects no pod", func(objs []*unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(find(objs, "Service", "router").Object, map[string]string{"app": "nope"}, "spec", "selector")
		}},
		{"router open to all", "open to every source", func(objs []*unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(find(objs, "NetworkPolicy", "router").Object, []any{map[string]any{}}, "spec", "ingress")
		}},
		{"listens on loopback", "unreachable from other pods", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "Deployment", "router"), "env", []any{map[string]any{"name": "SWITCHYARD_HTTP_ADDR", "value": "127.0.0.1:9091"}})
		}},
		{"undeclared port", "does not declare", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "StatefulSet", "sim"), "args", []any{"sim", "--host=0.0.0.0", "--port=8001"})
		}},
		{"bad flag", "flag provided but not defined", func(objs []*unstructured.Unstructured) {
			setContainer(find(objs, "StatefulSet", "sim"), "args", []any{"sim", "--hots=0.0.0.0"})
		}},
		{"token mounted", "automountServiceAccountToken", func(objs []*unstructured.Unstructured) {
			_ = unstructured.SetNestedField(find(objs, "ServiceAccount", "router").Object, true, "automountServiceAccountToken")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := render(t, sets[0])
			c.mutate(objs)
			errs := check(objs, sets[0].provided)
			for _, err := range errs {
				if strings.Contains(err.Error(), c.want) {
					return
				}
			}
			t.Fatalf("no error mentions %q; got %v", c.want, errs)
		})
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	panic(kind + "/" + name + " not rendered")
}

// setContainer sets a field of a workload's first container.
func setContainer(u *unstructured.Unstructured, field string, v any) {
	cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	cs[0].(map[string]any)[field] = v
	_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
}

var clusterScoped = []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}

// check returns every broken rule of a rendered set.
func check(objs []*unstructured.Unstructured, provided []string) []error {
	var errs []error
	bad := func(u *unstructured.Unstructured, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s/%s: %s", u.GetKind(), u.GetNamespace(), u.GetName(), fmt.Sprintf(format, args...)))
	}
	have := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		have[u.GetKind()+"/"+u.GetName()] = u
		if !slices.Contains(clusterScoped, u.GetKind()) && u.GetNamespace() == "" {
			bad(u, "names no namespace: it would land in whatever namespace kubectl's context names")
		}
	}
	for _, w := range workloads(objs) {
		errs = append(errs, checkWorkload(w, have, provided)...)
	}
	errs = append(errs, checkServices(objs)...)
	errs = append(errs, checkNetworkPolicies(objs)...)
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceAccount":
			auto, found, _ := unstructured.NestedBool(u.Object, "automountServiceAccountToken")
			if want := u.GetName() == "policyd"; !found || auto != want {
				bad(u, "automountServiceAccountToken must be %v: only policyd reads the Kubernetes API", want)
			}
		case "PodDisruptionBudget", "HorizontalPodAutoscaler":
			errs = append(errs, checkTarget(u, objs)...)
		}
	}
	return errs
}

// workload is a Deployment or StatefulSet with its pod template.
type workload struct {
	u    *unstructured.Unstructured
	spec map[string]any
}

func workloads(objs []*unstructured.Unstructured) []workload {
	var ws []workload
	for _, u := range objs {
		if u.GetKind() != "Deployment" && u.GetKind() != "StatefulSet" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
		ws = append(ws, workload{u, spec})
	}
	return ws
}

func (w workload) labels() map[string]string {
	l, _, _ := unstructured.NestedStringMap(w.u.Object, "spec", "template", "metadata", "labels")
	return l
}

func (w workload) containers() []map[string]any {
	cs, _, _ := unstructured.NestedSlice(w.spec, "containers")
	var out []map[string]any
	for _, c := range cs {
		out = append(out, c.(map[string]any))
	}
	return out
}

// restricted is whether the workload's namespace enforces the restricted
// Pod Security Standard (the vLLM pods of overlays/production do not).
func (w workload) restricted() bool { return w.u.GetNamespace() == "switchyard" }

func checkWorkload(w workload, have map[string]*unstructured.Unstructured, provided []string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s/%s: %s", w.u.GetKind(), w.u.GetNamespace(), w.u.GetName(), fmt.Sprintf(format, args...)))
	}
	need := func(kind, name string, optional bool) {
		if _, ok := have[kind+"/"+name]; !ok && !optional && !slices.Contains(provided, kind+"/"+name) {
			bad("needs %s/%s, which neither the set makes nor its documentation asks the operator for", kind, name)
		}
	}
	if w.restricted() {
		psc, _, _ := unstructured.NestedMap(w.spec, "securityContext")
		if psc["runAsNonRoot"] != true {
			bad("securityContext.runAsNonRoot must be true")
		}
		if seccomp, _, _ := unstructured.NestedString(psc, "seccompProfile", "type"); seccomp != "RuntimeDefault" {
			bad("securityContext.seccompProfile.type must be RuntimeDefault, got %q", seccomp)
		}
	}
	if sa, _, _ := unstructured.NestedString(w.spec, "serviceAccountName"); sa != "" {
		need("ServiceAccount", sa, false)
	}
	for _, c := range w.containers() {
		name, _ := c["name"].(string)
		image, _ := c["image"].(string)
		if !strings.Contains(image, "/") && !strings.Contains(image, ":") {
			bad("container %s: image %q was not rewritten by an images: entry", name, image)
		}
		if w.restricted() {
			sc, _ := c["securityContext"].(map[string]any)
			if sc["allowPrivilegeEscalation"] != false {
				bad("container %s: securityContext.allowPrivilegeEscalation must be false", name)
			}
			if sc["readOnlyRootFilesystem"] != true {
				bad("container %s: securityContext.readOnlyRootFilesystem must be true", name)
			}
			if drop, _, _ := unstructured.NestedStringSlice(sc, "capabilities", "drop"); !slices.Contains(drop, "ALL") {
				bad("container %s: securityContext.capabilities.drop must hold ALL", name)
			}
		}
		for _, r := range []string{"requests.cpu", "requests.memory", "limits.memory"} {
			if _, ok, _ := unstructured.NestedFieldNoCopy(c, append([]string{"resources"}, strings.Split(r, ".")...)...); !ok {
				bad("container %s: resources.%s is not set", name, r)
			}
		}
		for _, p := range []string{"readinessProbe", "livenessProbe"} {
			if _, ok := c[p]; !ok {
				bad("container %s: no %s", name, p)
			}
		}
		env, envErrs := containerEnv(c, have)
		for _, e := range envErrs {
			bad("container %s: %v", name, e)
		}
		for _, ref := range refs(c, w.spec) {
			need(ref.kind, ref.name, ref.optional)
		}
		if args, _, _ := unstructured.NestedStringSlice(c, "args"); strings.HasPrefix(image, "ghcr.io/switchyard-dev/switchyard") {
			if len(args) == 0 {
				bad("container %s: no args, want the command first", name)
				continue
			}
			errs = append(errs, checkService(w, c, args[0], env)...)
		}
	}
	return errs
}

// containerEnv is a container's environment as the kubelet builds it:
// envFrom ConfigMaps and Secrets of the set first, then env. Values
// from elsewhere (fieldRef, an operator's Secret) are "<from cluster>".
func containerEnv(c map[string]any, have map[string]*unstructured.Unstructured) (map[string]string, []error) {
	env := map[string]string{}
	var errs []error
	from, _, _ := unstructured.NestedSlice(c, "envFrom")
	for _, f := range from {
		for kind, key := range map[string]string{"ConfigMap": "configMapRef", "Secret": "secretRef"} {
			name, ok, _ := unstructured.NestedString(f.(map[string]any), key, "name")
			if !ok {
				continue
			}
			src, found := have[kind+"/"+name]
			if !found {
				// An operator's Secret: its keys are documented, not known here.
				continue
			}
			for _, field := range []string{"data", "stringData"} {
				data, _, _ := unstructured.NestedStringMap(src.Object, field)
				for k, v := range data {
					env[k] = v
					if field == "data" {
						env[k] = "<from cluster>"
					}
				}
			}
		}
	}
	vars, _, _ := unstructured.NestedSlice(c, "env")
	for _, v := range vars {
		m := v.(map[string]any)
		name, _ := m["name"].(string)
		if value, ok := m["value"].(string); ok {
			env[name] = value
		} else {
			env[name] = "<from cluster>"
		}
	}
	return env, errs
}

type ref struct {
	kind, name string
	optional   bool
}

// refs are the ConfigMaps, Secrets and claims a pod needs to start.
func refs(c, spec map[string]any) []ref {
	var out []ref
	from, _, _ := unstructured.NestedSlice(c, "envFrom")
	for _, f := range from {
		fm := f.(map[string]any)
		for kind, key := range map[string]string{"ConfigMap": "configMapRef", "Secret": "secretRef"} {
			if name, ok, _ := unstructured.NestedString(fm, key, "name"); ok {
				opt, _, _ := unstructured.NestedBool(fm, key, "optional")
				out = append(out, ref{kind, name, opt})
			}
		}
	}
	vols, _, _ := unstructured.NestedSlice(spec, "volumes")
	for _, v := range vols {
		vm := v.(map[string]any)
		if name, ok, _ := unstructured.NestedString(vm, "secret", "secretName"); ok {
			opt, _, _ := unstructured.NestedBool(vm, "secret", "optional")
			out = append(out, ref{"Secret", name, opt})
		}
		if name, ok, _ := unstructured.NestedString(vm, "configMap", "name"); ok {
			opt, _, _ := unstructured.NestedBool(vm, "configMap", "optional")
			out = append(out, ref{"ConfigMap", name, opt})
		}
		if name, ok, _ := unstructured.NestedString(vm, "persistentVolumeClaim", "claimName"); ok {
			out = append(out, ref{"PersistentVolumeClaim", name, false})
		}
		srcs, _, _ := unstructured.NestedSlice(vm, "projected", "sources")
		for _, s := range srcs {
			if name, ok, _ := unstructured.NestedString(s.(map[string]any), "secret", "name"); ok {
				opt, _, _ := unstructured.NestedBool(s.(map[string]any), "secret", "optional")
				out = append(out, ref{"Secret", name, opt})
			}
		}
	}
	return out
}

// serviceFlags is a service's flag set with its defaults, as
// `switchyard <service>` registers it, and its stop timeouts.
func serviceFlags(name string) (*flag.FlagSet, *lifecycle.Stop) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("log-level", "info", "")
	fs.String("log-format", "json", "")
	switch name {
	case "gateway":
		c := gateway.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, &c.Stop
	case "router":
		c := router.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, &c.Stop
	case "kvtracker":
		c := kvtracker.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, &c.Stop
	case "policyd":
		c := policyd.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, &c.Stop
	case "meter":
		c := meter.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, &c.Stop
	case "sim":
		c := sim.DefaultConfig()
		c.RegisterFlags(fs)
		return fs, nil
	}
	return nil, nil
}

// listenFlags are each command's flags that take a listen address (or,
// the simulator's, a host).
var listenFlags = map[string][]string{
	"sim":       {"host"},
	"gateway":   {"addr", "metrics-addr"},
	"router":    {"grpc-addr", "http-addr"},
	"kvtracker": {"http-addr"},
	"meter":     {"http-addr"},
	"policyd":   {"grpc-addr", "http-addr"},
}

// checkService checks a Switchyard service's container: every
// SWITCHYARD_ variable names a flag of that service and parses, every
// listen address reaches beyond loopback, the probes are its /readyz and
// /healthz, and the pod's grace period covers the drain delay and the
// servers' stop.
func checkService(w workload, c map[string]any, service string, env map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s %s/%s: %s", w.u.GetKind(), w.u.GetNamespace(), w.u.GetName(), fmt.Sprintf(format, args...)))
	}
	fs, stop := serviceFlags(service)
	if fs == nil {
		bad("runs %q, which is not a command these checks know", service)
		return errs
	}
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	if err := fs.Parse(args[1:]); err != nil {
		bad("%s: args: %v", service, err)
	}
	known := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { known[flagenv.EnvName(f.Name)] = true })
	for k := range env {
		if !strings.HasPrefix(k, flagenv.Prefix) {
			continue
		}
		if !known[k] {
			if isShared(k) {
				continue // switchyard-common's, read by the services that have the flag
			}
			bad("%s sets %s, which is no flag of `switchyard %s`", service, k, service)
		}
	}
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		if v == "<from cluster>" {
			return "", false
		}
		return v, ok
	}
	if err := flagenv.Apply(fs, lookup); err != nil {
		bad("%s: %v", service, err)
	}
	var declared []string
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	for _, p := range ports {
		declared = append(declared, fmt.Sprint(p.(map[string]any)["containerPort"]))
	}
	for _, name := range listenFlags[service] {
		v := fs.Lookup(name).Value.String()
		h, port, err := net.SplitHostPort(v)
		if err != nil {
			h = v // a host alone
		}
		if h != "" && h != "0.0.0.0" && h != "::" {
			bad("%s --%s is %q: unreachable from other pods and the kubelet's probes, want :PORT (%s)", service, name, v, flagenv.EnvName(name))
		}
		if err == nil && !slices.Contains(declared, port) {
			bad("%s --%s listens on port %s, which the container does not declare (%v)", service, name, port, declared)
		}
	}
	if f := fs.Lookup("port"); f != nil && !slices.Contains(declared, f.Value.String()) {
		bad("%s --port is %s, which the container does not declare (%v)", service, f.Value, declared)
	}
	if stop == nil {
		return errs // the simulator: no probes of ours, no drain
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		if got, _, _ := unstructured.NestedString(c, probe, "httpGet", "path"); got != path {
			bad("%s.httpGet.path is %q, want %s", probe, got, path)
		}
	}
	grace, found, _ := unstructured.NestedInt64(w.spec, "terminationGracePeriodSeconds")
	if !found {
		grace = 30
	}
	need := stop.DrainDelay + stop.ShutdownTimeout
	if d, err := time.ParseDuration(fs.Lookup("drain-delay").Value.String()); err == nil {
		need = d + mustDuration(fs.Lookup("shutdown-timeout").Value.String())
	}
	if time.Duration(grace)*time.Second < need+5*time.Second {
		bad("terminationGracePeriodSeconds %d is less than drain delay + shutdown timeout (%s) + 5s for the components", grace, need)
	}
	return errs
}

// isShared reports whether k is a variable of switchyard-common that some
// services have no flag for (policyd does not follow policyd).
func isShared(k string) bool { return k == "SWITCHYARD_POLICYD_ADDR" }

func mustDuration(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// checkServices: every Service selects the pods of some workload and its
// named target ports exist on them.
func checkServices(objs []*unstructured.Unstructured) []error {
	var errs []error
	ws := workloads(objs)
	for _, u := range objs {
		if u.GetKind() != "Service" {
			continue
		}
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector")
		var matched []workload
		for _, w := range ws {
			if w.u.GetNamespace() == u.GetNamespace() && len(sel) > 0 && subset(sel, w.labels()) {
				matched = append(matched, w)
			}
		}
		if len(matched) == 0 {
			errs = append(errs, fmt.Errorf("Service %s/%s: selects no pod of the set (selector %v)", u.GetNamespace(), u.GetName(), sel))
			continue
		}
		ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
		for _, p := range ports {
			target, ok := p.(map[string]any)["targetPort"].(string)
			if !ok {
				continue
			}
			for _, w := range matched {
				if !hasPort(w, target) {
					errs = append(errs, fmt.Errorf("Service %s/%s: targetPort %q is no port of %s %s", u.GetNamespace(), u.GetName(), target, w.u.GetKind(), w.u.GetName()))
				}
			}
		}
	}
	return errs
}

func hasPort(w workload, name string) bool {
	for _, c := range w.containers() {
		ps, _, _ := unstructured.NestedSlice(c, "ports")
		for _, p := range ps {
			if p.(map[string]any)["name"] == name {
				return true
			}
		}
	}
	return false
}

func subset(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkNetworkPolicies: in namespace switchyard every pod is selected by
// a policy beyond the default deny, and only the gateway's accepts every
// source.
func checkNetworkPolicies(objs []*unstructured.Unstructured) []error {
	var errs []error
	var pols []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "NetworkPolicy" && u.GetNamespace() == "switchyard" {
			pols = append(pols, u)
		}
	}
	if len(pols) == 0 {
		return nil // a set without the base's policies (none renders so)
	}
	for _, u := range pols {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "ingress")
		for _, r := range rules {
			if _, ok := r.(map[string]any)["from"]; !ok && u.GetName() != "gateway" {
				errs = append(errs, fmt.Errorf("NetworkPolicy %s/%s: a rule without from is open to every source; only the gateway's API may be", u.GetNamespace(), u.GetName()))
			}
		}
	}
	for _, w := range workloads(objs) {
		if !w.restricted() {
			continue
		}
		selected := false
		for _, p := range pols {
			sel, _, _ := unstructured.NestedStringMap(p.Object, "spec", "podSelector", "matchLabels")
			if len(sel) > 0 && subset(sel, w.labels()) {
				selected = true
			}
		}
		if !selected {
			errs = append(errs, fmt.Errorf("%s %s/%s: no NetworkPolicy but the default deny selects its pods, so nothing reaches them", w.u.GetKind(), w.u.GetNamespace(), w.u.GetName()))
		}
	}
	return errs
}

// checkTarget: a PodDisruptionBudget selects some workload's pods, an
// HPA scales a Deployment of the set that leaves its replicas to it.
func checkTarget(u *unstructured.Unstructured, objs []*unstructured.Unstructured) []error {
	switch u.GetKind() {
	case "PodDisruptionBudget":
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		for _, w := range workloads(objs) {
			if w.u.GetNamespace() == u.GetNamespace() && subset(sel, w.labels()) {
				return nil
			}
		}
		return []error{fmt.Errorf("PodDisruptionBudget %s/%s: selects no pod of the set", u.GetNamespace(), u.GetName())}
	default:
		name, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
		for _, w := range workloads(objs) {
			if w.u.GetKind() == "Deployment" && w.u.GetName() == name && w.u.GetNamespace() == u.GetNamespace() {
				if _, has, _ := unstructured.NestedInt64(w.u.Object, "spec", "replicas"); has {
					return []error{fmt.Errorf("HorizontalPodAutoscaler %s/%s: Deployment %s sets spec.replicas, which every apply would reset under the autoscaler", u.GetNamespace(), u.GetName(), name)}
				}
				return nil
			}
		}
		return []error{fmt.Errorf("HorizontalPodAutoscaler %s/%s: scales Deployment %q, which the set does not have", u.GetNamespace(), u.GetName(), name)}
	}
}
