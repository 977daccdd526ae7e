// Package kube is policyd's Kubernetes source: it follows the five
// switchyard.dev CRDs (and the EndpointSlices of worker sets that name a
// Service) through dynamic informers, hands every burst of changes to
// policyd to compile, and writes each resource's Accepted condition back.
//
// Secrets of API key digests. A GatewayBackend tenant names the Secret
// holding its keys' digests (keysSecret). The source reads exactly those
// Secrets, by name, with a get on every compile and every
// --key-secrets-interval: no list or watch of Secrets, so policyd needs
// only get on secrets (which RBAC can narrow to those names) and never
// holds any other Secret in memory. A key revoked from its Secret is
// refused within the interval, and so are all of a tenant's keys when its
// Secret is deleted. A Secret that cannot be read (forbidden, API errors)
// refuses its GatewayBackend with the reason, and the last good snapshot
// keeps serving.
//
// Workers of a Service. A worker set that names a Service has as workers
// the ready endpoints of the Service's EndpointSlices, each named after
// its pod. Their ports are the slice's ports named http, kv-events and
// kv-replay (PortHTTP...), which are the pods' own numbers, else the
// worker set's port, kvEvents.port and kvEvents.replayPort: so workers
// whose ports differ (named targetPorts, host-network pods sharing an
// address) are each reached on their own.
//
// Starting. New finds the client configuration as kubectl does
// (--kubeconfig, $KUBECONFIG, ~/.kube/config), else a pod's service
// account, and lists every watched resource: a client that cannot work
// (no configuration, refused credentials at once; an unreachable server,
// CRDs not installed, RBAC missing after 10 s of trying) fails policyd
// with the reason before it serves. klog, client-go's log, goes into
// policyd's log.
//
// It is the only package of Switchyard that needs client-go, which is
// about half of the binary's compile time; the switchyard binary registers
// it with policyd.RegisterSource, so that nothing else compiles or links
// it, and `go build -tags nokube` builds a binary without it.
package kube

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// ReasonBlocked is the Accepted condition's reason for a valid resource
// that is not served because other resources are invalid: snapshots are
// all or nothing, so one broken policy holds back every change.
const ReasonBlocked = "BlockedByOtherErrors"

// maxConditionMessage bounds a condition message (the API allows 32 KiB;
// kubectl output does not need that much).
const maxConditionMessage = 2048

// Source follows the five CRDs through dynamic informers and writes each
// resource's Accepted condition back.
type Source struct {
	client      dynamic.Interface
	namespace   string
	debounce    time.Duration
	secretsPoll time.Duration
	writeStatus bool
	log         zerolog.Logger
	statusWrite *prometheus.CounterVec
	slices      cache.GenericLister
}

var (
	_ policyd.SourceFactory = New
	_ policyd.Source        = (*Source)(nil)
	_ prometheus.Collector  = (*Source)(nil)
)

// New is the source's policyd.SourceFactory. It routes klog, client-go's
// log, into log (routeKlog); finds the client configuration
// (cfg.Kubeconfig, else as kubectl does, else in-cluster: restConfig);
// and checks that the client can list every resource the source watches
// (checkAccess). So policyd fails with the reason before it serves, when
// it could not follow the resources, rather than serving nothing while
// the informers retry. It watches cfg.Namespace (all when empty).
func New(cfg policyd.Config, log zerolog.Logger) (policyd.Source, error) {
	routeKlog(log)
	client, rc, origin, err := newDynamic(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if err := checkAccess(context.Background(), rc, cfg.Namespace, origin); err != nil {
		return nil, err
	}
	log.Info().Str("kubeconfig", origin).Str("server", rc.Host).Msg("kubernetes API server reached")
	return NewSource(client, cfg, log), nil
}

// NewSource is the source over a given client (tests, embedding); of cfg
// it reads Namespace, Debounce and WriteStatus.
func NewSource(client dynamic.Interface, cfg policyd.Config, log zerolog.Logger) *Source {
	return &Source{
		client:      client,
		namespace:   cfg.Namespace,
		debounce:    cfg.Debounce,
		secretsPoll: cfg.KeySecretsInterval,
		writeStatus: cfg.WriteStatus,
		log:         log,
		statusWrite: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_policyd_status_writes_total",
			Help: "status.conditions writes to Kubernetes resources, by result.",
		}, []string{"result"}),
	}
}

// Describe and Collect serve the source's metrics with policyd's.
func (k *Source) Describe(ch chan<- *prometheus.Desc) { k.statusWrite.Describe(ch) }

// Collect implements prometheus.Collector.
func (k *Source) Collect(ch chan<- prometheus.Metric) { k.statusWrite.Collect(ch) }

// endpointSlicesGVR is discovery.k8s.io/v1 EndpointSlices.
var endpointSlicesGVR = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}

// secretsGVR is core v1 Secrets, read one by one by name.
var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Run starts the informers and compiles after every burst of changes
// until ctx ends.
func (k *Source) Run(ctx context.Context, apply policyd.ApplyFunc) error {
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(k.client, 0, k.namespace, nil)
	trigger := make(chan struct{}, 1)
	notify := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	}
	listers := make(map[string]cache.GenericLister, len(v1alpha1.Kinds))
	for _, kind := range v1alpha1.Kinds {
		inf := factory.ForResource(v1alpha1.Resources[kind])
		if _, err := inf.Informer().AddEventHandler(handler); err != nil {
			return fmt.Errorf("watch %s: %w", kind, err)
		}
		listers[kind] = inf.Lister()
	}
	// Worker addresses of worker sets that name a Service come from its
	// EndpointSlices. Slices carry no label saying they are ours, so this
	// follows every slice in the namespace(s) watched.
	esInf := factory.ForResource(endpointSlicesGVR)
	if _, err := esInf.Informer().AddEventHandler(handler); err != nil {
		return fmt.Errorf("watch endpointslices: %w", err)
	}
	k.slices = esInf.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for gvr, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sync informer for %s", gvr.Resource)
		}
	}
	k.log.Info().Str("namespace", k.namespace).Msg("kubernetes informers synced")
	notify()
	// Secrets are not watched: while some tenant names one, every
	// interval re-reads them (compiling an unchanged set changes nothing).
	poll := k.secretsPoll
	if poll <= 0 {
		poll = 3 * time.Second
	}
	secretsTick := time.NewTicker(poll)
	defer secretsTick.Stop()
	namesSecrets := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-trigger:
		case <-secretsTick.C:
			if !namesSecrets {
				continue
			}
		}
		if k.debounce > 0 {
			t := time.NewTimer(k.debounce)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		select { // events during the debounce are covered by this read
		case <-trigger:
		default:
		}
		objs, raws, diags := k.read(listers)
		namesSecrets = k.readKeySecrets(ctx, objs)
		res := apply(objs, diags)
		if k.writeStatus {
			k.writeStatuses(ctx, raws, res)
		}
	}
}

// read converts every cached resource to its typed form, in a fixed order.
func (k *Source) read(listers map[string]cache.GenericLister) ([]*policy.Object, []*unstructured.Unstructured, policy.Diagnostics) {
	var raws []*unstructured.Unstructured
	for _, kind := range v1alpha1.Kinds {
		list, err := listers[kind].List(labels.Everything())
		if err != nil {
			continue
		}
		for _, ro := range list {
			if u, ok := ro.(*unstructured.Unstructured); ok {
				raws = append(raws, u)
			}
		}
	}
	slices.SortFunc(raws, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(kindOrder(a.GetKind()), kindOrder(b.GetKind())), cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	var objs []*policy.Object
	var diags policy.Diagnostics
	for _, u := range raws {
		o, err := typedObject(u)
		if err != nil {
			diags = append(diags, policy.Diagnostic{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Message: err.Error()})
			continue
		}
		if ws := o.WorkerSet; ws != nil && ws.Spec.Service != "" {
			ws.Spec.Static = append(ws.Spec.Static, k.discover(ws)...)
		}
		objs = append(objs, o)
	}
	return objs, raws, diags
}

// readKeySecrets reads the Secrets the GatewayBackends' tenants name into
// their objects and reports whether any tenant names one.
func (k *Source) readKeySecrets(ctx context.Context, objs []*policy.Object) bool {
	named := false
	for _, o := range objs {
		if o.Backend == nil {
			continue
		}
		for _, t := range o.Backend.Spec.Tenants {
			if t.KeysSecret == "" {
				continue
			}
			named = true
			if o.KeySecrets == nil {
				o.KeySecrets = map[string]policy.KeySecret{}
			}
			if _, done := o.KeySecrets[t.KeysSecret]; !done {
				o.KeySecrets[t.KeysSecret] = k.keySecret(ctx, o.Namespace, t.KeysSecret)
			}
		}
	}
	return named
}

// maxSecretEntries bounds the digests read from one Secret (a Secret is
// at most 1 MiB; a digest entry is about 90 bytes).
const maxSecretEntries = 4096

// keySecret reads one Secret of key digests. Errors name the Secret and
// the API's reason, never a value.
func (k *Source) keySecret(ctx context.Context, namespace, name string) policy.KeySecret {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := k.client.Resource(secretsGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// A deleted Secret revokes its keys: no key, not an error that
		// would keep the last snapshot (and the keys) serving.
		return policy.KeySecret{Missing: true}
	}
	if err != nil {
		k.log.Warn().Err(err).Str("secret", namespace+"/"+name).Msg("read key secret")
		return policy.KeySecret{Err: secretError(err)}
	}
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	if len(data) > maxSecretEntries {
		return policy.KeySecret{Err: fmt.Sprintf("%d entries, more than %d", len(data), maxSecretEntries)}
	}
	ks := policy.KeySecret{Digests: make(map[string]string, len(data))}
	for key, v := range data {
		s, _ := v.(string)
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return policy.KeySecret{Err: fmt.Sprintf("entry %q is not base64", key)}
		}
		ks.Digests[key] = strings.TrimSpace(string(raw))
	}
	return ks
}

// secretError is what a Secret read failure tells the user.
func secretError(err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden: policyd's service account needs get on this Secret"
	}
	return err.Error()
}

// Service port names whose numbers, in a worker set's EndpointSlices,
// are the pods' ports: a Service with named targetPorts resolves them per
// pod, and pods on different numbers (host-network workers sharing a
// node's address) are in different slices. A slice without the name uses
// the worker set's number (port, kvEvents.port, kvEvents.replayPort).
const (
	PortHTTP     = "http"      // the vLLM API (and metrics)
	PortKVEvents = "kv-events" // the ZMQ PUB socket of KV events
	PortKVReplay = "kv-replay" // the ZMQ ROUTER socket of replays
)

// discover lists the ready endpoints of a worker set's Service, as static
// workers named after their pods, in a fixed order.
func (k *Source) discover(ws *v1alpha1.InferenceWorkerSet) []v1alpha1.StaticWorker {
	if k.slices == nil {
		return nil
	}
	sel := labels.SelectorFromSet(labels.Set{"kubernetes.io/service-name": ws.Spec.Service})
	list, err := k.slices.ByNamespace(ws.Namespace).List(sel)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []v1alpha1.StaticWorker
	for _, ro := range list {
		u, ok := ro.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		ports := workerPorts(ws, u)
		eps, _, _ := unstructured.NestedSlice(u.Object, "endpoints")
		for _, e := range eps {
			ep, ok := e.(map[string]any)
			if !ok {
				continue
			}
			w, ok := ports.worker(ep)
			if !ok || seen[w.ID] {
				continue
			}
			seen[w.ID] = true
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.StaticWorker) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// ports are the port numbers of one slice's endpoints; 0 is none.
type ports struct {
	http, kv, replay int64
}

// workerPorts are the ports of a slice's endpoints: the slice's named
// ports, else the worker set's.
func workerPorts(ws *v1alpha1.InferenceWorkerSet, slice *unstructured.Unstructured) ports {
	named := map[string]int64{}
	list, _, _ := unstructured.NestedSlice(slice.Object, "ports")
	for _, p := range list {
		m, ok := p.(map[string]any)
		if !ok {
			continue
		}
		name, _, _ := unstructured.NestedString(m, "name")
		if n, ok, _ := unstructured.NestedInt64(m, "port"); ok && n > 0 {
			named[name] = n
		}
	}
	p := ports{http: cmp.Or(named[PortHTTP], int64(ws.Spec.Port), 8000)}
	if kv := ws.Spec.KVEvents; kv != nil {
		p.kv = cmp.Or(named[PortKVEvents], int64(kv.Port))
		p.replay = cmp.Or(named[PortKVReplay], int64(kv.ReplayPort))
	}
	return p
}

// worker is a ready endpoint as a static worker.
func (p ports) worker(ep map[string]any) (v1alpha1.StaticWorker, bool) {
	if ready, found, _ := unstructured.NestedBool(ep, "conditions", "ready"); found && !ready {
		return v1alpha1.StaticWorker{}, false // nil means ready, per the EndpointSlice API
	}
	addrs, _, _ := unstructured.NestedStringSlice(ep, "addresses")
	if len(addrs) == 0 {
		return v1alpha1.StaticWorker{}, false
	}
	id, _, _ := unstructured.NestedString(ep, "targetRef", "name")
	if id == "" {
		id = addrs[0]
	}
	hostPort := func(port int64) string { return net.JoinHostPort(addrs[0], strconv.FormatInt(port, 10)) }
	w := v1alpha1.StaticWorker{ID: id, URL: "http://" + hostPort(p.http)}
	if p.kv > 0 {
		w.KVEventsEndpoint = "tcp://" + hostPort(p.kv)
	}
	if p.replay > 0 {
		w.KVReplayEndpoint = "tcp://" + hostPort(p.replay)
	}
	return w, true
}

func kindOrder(kind string) int { return slices.Index(v1alpha1.Kinds, kind) }

// typedObject converts an unstructured resource to its API type.
func typedObject(u *unstructured.Unstructured) (*policy.Object, error) {
	var typed any
	switch u.GetKind() {
	case v1alpha1.KindInferenceWorkerSet:
		typed = &v1alpha1.InferenceWorkerSet{}
	case v1alpha1.KindInferencePool:
		typed = &v1alpha1.InferencePool{}
	case v1alpha1.KindInferenceProvider:
		typed = &v1alpha1.InferenceProvider{}
	case v1alpha1.KindInferencePolicy:
		typed = &v1alpha1.InferencePolicy{}
	case v1alpha1.KindGatewayBackend:
		typed = &v1alpha1.GatewayBackend{}
	default:
		return nil, fmt.Errorf("unexpected kind %q", u.GetKind())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), typed); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return policy.ObjectOf(typed)
}

// condition is the Accepted condition a resource should carry after res.
func (k *Source) condition(u *unstructured.Unstructured, res policyd.Result) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionAccepted, ObservedGeneration: u.GetGeneration()}
	mine := res.Diags.For(u.GetKind(), u.GetNamespace(), u.GetName())
	if errs := mine.Errors(); len(errs) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonInvalid, errs.Summary(5)
		return clip(c)
	}
	served := res.Served != nil && (res.Applied || res.Unchanged)
	if !served && res.Served != nil {
		gen, ok := res.Generations[refOf(u)]
		served = ok && gen == u.GetGeneration()
	}
	if !served {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonBlocked
		c.Message = "valid, but not served: other resources have errors: " + res.Diags.Errors().Summary(3)
		return clip(c)
	}
	c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonAccepted
	// No revision in the message: replicas number revisions apart, and
	// their writes would never settle.
	c.Message = "served"
	if !res.Applied && !res.Unchanged {
		c.Message += " (other resources have errors; their changes are not served)"
	}
	if w := mine.Warnings(); len(w) > 0 {
		c.Message += "; warnings: " + w.Summary(3)
	}
	return clip(c)
}

func clip(c metav1.Condition) metav1.Condition {
	if len(c.Message) > maxConditionMessage {
		c.Message = c.Message[:maxConditionMessage-3] + "..."
	}
	return c
}

func refOf(u *unstructured.Unstructured) string {
	o := policy.Object{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	return o.Ref()
}

// writeStatuses updates the Accepted condition of every resource whose
// condition changed. Unchanged conditions are not written, so the update
// events the writes cause settle after one round.
func (k *Source) writeStatuses(ctx context.Context, raws []*unstructured.Unstructured, res policyd.Result) {
	now := metav1.NewTime(time.Now())
	for _, u := range raws {
		want := k.condition(u, res)
		var st v1alpha1.Status
		if m, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
			_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
		}
		extra := extraStatus(u, want.Status == metav1.ConditionTrue, res.Served)
		if have := meta.FindStatusCondition(st.Conditions, want.Type); have != nil &&
			have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message &&
			have.ObservedGeneration == want.ObservedGeneration && st.ObservedGeneration == u.GetGeneration() &&
			sameExtra(u, extra) {
			continue
		}
		want.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, want)
		st.ObservedGeneration = u.GetGeneration()
		conds, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			continue
		}
		out := u.DeepCopy()
		status, _, _ := unstructured.NestedMap(out.Object, "status")
		if status == nil {
			status = map[string]any{}
		}
		status["conditions"] = conds["conditions"]
		status["observedGeneration"] = conds["observedGeneration"]
		for f, v := range extra {
			status[f] = v
		}
		if err := unstructured.SetNestedMap(out.Object, status, "status"); err != nil {
			continue
		}
		gvr := v1alpha1.Resources[u.GetKind()]
		_, err = k.client.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, out, metav1.UpdateOptions{})
		if err != nil {
			// A conflict means a newer version exists: its update event
			// triggers another round, which writes again.
			k.statusWrite.WithLabelValues("error").Inc()
			k.log.Debug().Err(err).Str("kind", u.GetKind()).Str("namespace", u.GetNamespace()).Str("name", u.GetName()).Msg("write status")
			continue
		}
		k.statusWrite.WithLabelValues("ok").Inc()
	}
}

// extraStatus returns the kind-specific status counters; served is the
// snapshot being served.
func extraStatus(u *unstructured.Unstructured, accepted bool, served *policy.Snapshot) map[string]int64 {
	switch u.GetKind() {
	case v1alpha1.KindInferencePolicy:
		n := int64(0)
		if accepted {
			rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
			n = int64(len(rules))
		}
		return map[string]int64{"rules": n}
	case v1alpha1.KindInferenceWorkerSet:
		n := int64(0)
		if accepted && served != nil {
			if ws := served.WorkerSet(u.GetName()); ws != nil {
				n = int64(len(ws.Static)) // static and discovered
			}
		}
		return map[string]int64{"endpoints": n}
	}
	return nil
}

func sameExtra(u *unstructured.Unstructured, extra map[string]int64) bool {
	for f, v := range extra {
		have, _, _ := unstructured.NestedInt64(u.Object, "status", f)
		if have != v {
			return false
		}
	}
	return true
}
