package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

const examplesDir = "../../../deploy/examples"

// readManifests decodes the dev catalog's resources.
func readManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(examplesDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			// The directory is also a kustomization (its Namespace, its
			// kustomization.yaml): only the switchyard.dev resources are
			// the catalog.
			if len(u.Object) > 0 && u.GroupVersionKind().Group == v1alpha1.GroupVersion.Group {
				u.SetGeneration(1)
				out = append(out, u)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func listKinds() map[schema.GroupVersionResource]string {
	m := map[schema.GroupVersionResource]string{}
	for kind, gvr := range v1alpha1.Resources {
		m[gvr] = kind + "List"
	}
	m[endpointSlicesGVR] = "EndpointSliceList"
	m[secretsGVR] = "SecretList"
	return m
}

// kubeEnv is policyd in Kubernetes mode over client-go's fake dynamic
// client.
type kubeEnv struct {
	t      *testing.T
	client *dynamicfake.FakeDynamicClient
	srv    *policyd.Server
}

func (e *kubeEnv) get(kind, name string) *unstructured.Unstructured {
	e.t.Helper()
	return getResource(e.t, e.client, kind, name)
}

// getResource reads a resource of kind in namespace inference.
func getResource(t *testing.T, client dynamic.Interface, kind, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := client.Resource(v1alpha1.Resources[kind]).Namespace("inference").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// accepted returns the Accepted condition of a resource, nil when absent.
func (e *kubeEnv) accepted(kind, name string) *metav1.Condition {
	return acceptedOf(e.t, e.get(kind, name))
}

// acceptedOf is u's Accepted condition, nil when absent.
func acceptedOf(t *testing.T, u *unstructured.Unstructured) *metav1.Condition {
	t.Helper()
	m, ok, _ := unstructured.NestedMap(u.Object, "status")
	if !ok {
		return nil
	}
	var st v1alpha1.Status
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionAccepted)
}

func (e *kubeEnv) waitCondition(kind, name string, status metav1.ConditionStatus, reason string, generation int64) *metav1.Condition {
	e.t.Helper()
	var c *metav1.Condition
	testkit.Eventually(e.t, 10*time.Second, kind+" "+name+" "+reason, func() bool {
		c = e.accepted(kind, name)
		return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == generation
	})
	return c
}

// edit applies f to a resource's spec and bumps its generation, as the
// API server would.
func (e *kubeEnv) edit(kind, name string, f func(u *unstructured.Unstructured)) {
	e.t.Helper()
	u := e.get(kind, name)
	f(u)
	u.SetGeneration(u.GetGeneration() + 1)
	if _, err := e.client.Resource(v1alpha1.Resources[kind]).Namespace("inference").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func setObjective(obj string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		route := rules[0].(map[string]any)["route"].(map[string]any)
		route["select"].([]any)[0].(map[string]any)["minimize"] = obj
		_ = unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
	}
}

func startKube(t *testing.T, objs []*unstructured.Unstructured, opts ...func(*policyd.Config)) *kubeEnv {
	ro := make([]runtime.Object, len(objs))
	for i, o := range objs {
		ro[i] = o
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(), ro...)
	cfg := policyd.DefaultConfig()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Source, cfg.Debounce = policyd.SourceKubernetes, 5*time.Millisecond
	cfg.Namespace = "inference"
	for _, o := range opts {
		o(&cfg)
	}
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	s, err := policyd.NewWithSource(cfg, NewSource(client, cfg, log), log)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, s.Serve)
	return &kubeEnv{t: t, client: client, srv: s}
}

// Statuses are written back: Invalid with the message on the broken
// resource, blocked or accepted on the others, and they settle.
func TestKubernetesModeStatus(t *testing.T) {
	objs := readManifests(t)
	if len(objs) != 11 {
		t.Fatalf("%d manifests in the dev catalog, want 11", len(objs))
	}
	for _, o := range objs {
		if o.GetName() == "burst-policy" {
			setObjective("PredictedTTTF")(o)
		}
	}
	e := startKube(t, objs)

	// Broken from the start: nothing served, the policy says why, the
	// others say they wait on it.
	c := e.waitCondition(v1alpha1.KindInferencePolicy, "burst-policy", metav1.ConditionFalse, v1alpha1.ReasonInvalid, 1)
	if !strings.Contains(c.Message, `spec.rules[0].route.select[0].minimize: unknown objective "PredictedTTTF" (did you mean PredictedTTFT?)`) {
		t.Errorf("message %q", c.Message)
	}
	c = e.waitCondition(v1alpha1.KindInferenceWorkerSet, "qwen-workers", metav1.ConditionFalse, ReasonBlocked, 1)
	if !strings.Contains(c.Message, "PredictedTTTF") {
		t.Errorf("blocked message %q", c.Message)
	}
	if _, rev := e.srv.Snapshot(); rev != 0 {
		t.Errorf("revision %d served from invalid resources", rev)
	}
	if code := testkit.HTTPStatus(t, "http://"+e.srv.HTTPAddr()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("readyz %d", code)
	}

	// Fixed: everything accepted, with the counters.
	e.edit(v1alpha1.KindInferencePolicy, "burst-policy", setObjective("PredictedTTFT"))
	e.waitCondition(v1alpha1.KindInferencePolicy, "burst-policy", metav1.ConditionTrue, v1alpha1.ReasonAccepted, 2)
	for _, o := range objs {
		gen := int64(1)
		if o.GetName() == "burst-policy" {
			gen = 2
		}
		e.waitCondition(o.GetKind(), o.GetName(), metav1.ConditionTrue, v1alpha1.ReasonAccepted, gen)
	}
	snap, rev := e.srv.Snapshot()
	if rev == 0 || snap.Program("dev") == nil {
		t.Fatalf("no snapshot after the fix")
	}
	if n, _, _ := unstructured.NestedInt64(e.get(v1alpha1.KindInferencePolicy, "burst-policy").Object, "status", "rules"); n != 1 {
		t.Errorf("status.rules %d", n)
	}
	if n, _, _ := unstructured.NestedInt64(e.get(v1alpha1.KindInferenceWorkerSet, "qwen-workers").Object, "status", "endpoints"); n != 2 {
		t.Errorf("status.endpoints %d", n)
	}

	// A later invalid edit: that policy turns Invalid, the rest stay
	// accepted and the last good snapshot keeps serving.
	e.edit(v1alpha1.KindInferencePolicy, "pii-stays-local", setObjective("Fastest"))
	e.waitCondition(v1alpha1.KindInferencePolicy, "pii-stays-local", metav1.ConditionFalse, v1alpha1.ReasonInvalid, 2)
	if c := e.accepted(v1alpha1.KindInferencePolicy, "burst-policy"); c.Status != metav1.ConditionTrue {
		t.Errorf("burst-policy %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if _, now := e.srv.Snapshot(); now != rev {
		t.Errorf("revision moved from %d to %d on an invalid edit", rev, now)
	}

	// Writes settle: our own status updates do not cause more writes.
	count := func() int {
		n := 0
		for _, a := range e.client.Actions() {
			if a.GetVerb() == "update" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	last, stable := count(), 0
	testkit.Eventually(t, 10*time.Second, "status writes to settle", func() bool {
		if n := count(); n != last {
			last, stable = n, 0
			return false
		}
		stable++
		return stable >= 20 // 200ms without a write
	})

	// The source's own metrics are served with policyd's.
	resp, err := http.Get("http://" + e.srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`switchyard_policyd_status_writes_total{result="ok"} %d`, last); !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

func endpointSlice(name, service string, eps ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(eps))
	for i, e := range eps {
		list[i] = e
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{"name": name, "namespace": "inference",
			"labels": map[string]any{"kubernetes.io/service-name": service}},
		"addressType": "IPv4",
		"endpoints":   list,
	}}
}

func podEndpoint(pod, addr string, ready bool) map[string]any {
	return map[string]any{"addresses": []any{addr}, "conditions": map[string]any{"ready": ready},
		"targetRef": map[string]any{"kind": "Pod", "name": pod}}
}

// Worker addresses of a worker set with a Service come from its ready
// EndpointSlice endpoints, and follow them.
func TestKubernetesEndpointSlices(t *testing.T) {
	objs := readManifests(t)
	for _, o := range objs {
		if o.GetName() == "qwen-workers" {
			unstructured.RemoveNestedField(o.Object, "spec", "static")
			_ = unstructured.SetNestedField(o.Object, "qwen", "spec", "service")
			_ = unstructured.SetNestedField(o.Object, map[string]any{"port": int64(5557), "replayPort": int64(5567)}, "spec", "kvEvents")
		}
	}
	objs = append(objs,
		endpointSlice("qwen-a", "qwen", podEndpoint("qwen-1", "127.0.0.12", false), podEndpoint("qwen-0", "127.0.0.11", true)),
		endpointSlice("other", "unrelated", podEndpoint("x", "127.0.0.99", true)))
	e := startKube(t, objs)
	e.waitCondition(v1alpha1.KindInferenceWorkerSet, "qwen-workers", metav1.ConditionTrue, v1alpha1.ReasonAccepted, 1)
	snap, rev := e.srv.Snapshot()
	ws := snap.WorkerSet("qwen-workers")
	if len(ws.Static) != 1 || ws.Static[0].ID != "qwen-0" || ws.Static[0].URL != "http://127.0.0.11:8000" ||
		ws.Static[0].KVEventsEndpoint != "tcp://127.0.0.11:5557" || ws.Static[0].KVReplayEndpoint != "tcp://127.0.0.11:5567" {
		t.Fatalf("discovered %+v", ws.Static)
	}

	// The second pod turns ready: a new revision carries it.
	slice := endpointSlice("qwen-a", "qwen", podEndpoint("qwen-1", "127.0.0.12", true), podEndpoint("qwen-0", "127.0.0.11", true))
	if _, err := e.client.Resource(endpointSlicesGVR).Namespace("inference").Update(context.Background(), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the new endpoint", func() bool {
		s, r := e.srv.Snapshot()
		return r > rev && len(s.WorkerSet("qwen-workers").Static) == 2
	})
	testkit.Eventually(t, 10*time.Second, "status.endpoints", func() bool {
		n, _, _ := unstructured.NestedInt64(e.get(v1alpha1.KindInferenceWorkerSet, "qwen-workers").Object, "status", "endpoints")
		return n == 2
	})
}

// slicePorts sets a slice's ports (name → number).
func slicePorts(u *unstructured.Unstructured, ports map[string]int64) *unstructured.Unstructured {
	var list []any
	for name, n := range ports {
		list = append(list, map[string]any{"name": name, "port": n, "protocol": "TCP"})
	}
	_ = unstructured.SetNestedSlice(u.Object, list, "ports")
	return u
}

// Workers of one address on different ports, as host-network pods or
// named targetPorts give, are in slices of their own ports: each worker
// takes its slice's http, kv-events and kv-replay numbers, and a slice
// without them the worker set's.
func TestEndpointSlicePortNames(t *testing.T) {
	objs := readManifests(t)
	for _, o := range objs {
		if o.GetName() == "qwen-workers" {
			unstructured.RemoveNestedField(o.Object, "spec", "static")
			_ = unstructured.SetNestedField(o.Object, "qwen", "spec", "service")
			_ = unstructured.SetNestedField(o.Object, int64(8100), "spec", "port")
			_ = unstructured.SetNestedField(o.Object, map[string]any{"port": int64(5557), "replayPort": int64(5567)}, "spec", "kvEvents")
		}
	}
	objs = append(objs,
		slicePorts(endpointSlice("qwen-a", "qwen", podEndpoint("qwen-0", "127.0.0.1", true)),
			map[string]int64{PortHTTP: 9000, PortKVEvents: 9001, PortKVReplay: 9002}),
		slicePorts(endpointSlice("qwen-b", "qwen", podEndpoint("qwen-1", "127.0.0.1", true)),
			map[string]int64{PortHTTP: 9010, PortKVEvents: 9011, "metrics": 9019}),
		endpointSlice("qwen-c", "qwen", podEndpoint("qwen-2", "127.0.0.2", true)))
	e := startKube(t, objs)
	e.waitCondition(v1alpha1.KindInferenceWorkerSet, "qwen-workers", metav1.ConditionTrue, v1alpha1.ReasonAccepted, 1)
	snap, _ := e.srv.Snapshot()
	got := snap.WorkerSet("qwen-workers").Static
	want := []v1alpha1.StaticWorker{
		{ID: "qwen-0", URL: "http://127.0.0.1:9000", KVEventsEndpoint: "tcp://127.0.0.1:9001", KVReplayEndpoint: "tcp://127.0.0.1:9002"},
		{ID: "qwen-1", URL: "http://127.0.0.1:9010", KVEventsEndpoint: "tcp://127.0.0.1:9011", KVReplayEndpoint: "tcp://127.0.0.1:5567"},
		{ID: "qwen-2", URL: "http://127.0.0.2:8100", KVEventsEndpoint: "tcp://127.0.0.2:5557", KVReplayEndpoint: "tcp://127.0.0.2:5567"},
	}
	if len(got) != len(want) {
		t.Fatalf("discovered %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].URL != want[i].URL || got[i].KVEventsEndpoint != want[i].KVEventsEndpoint || got[i].KVReplayEndpoint != want[i].KVReplayEndpoint {
			t.Errorf("worker %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
