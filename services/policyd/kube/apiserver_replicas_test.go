package kube

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/internal/testkit/kubeapi"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// startReplica runs one policyd against api as user until the test ends.
func startReplica(t *testing.T, api *kubeapi.Server, user, name string) *policyd.Server {
	t.Helper()
	cfg := kubeConfig(api.Kubeconfig(t, user))
	log := zerolog.Nop()
	if testing.Verbose() {
		log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).With().Str("replica", name).Logger()
	}
	src, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := policyd.NewWithSource(cfg, src, log)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Serve(t, srv.Serve)
	return srv
}

// statusWrites is a replica's switchyard_policyd_status_writes_total, ok
// and error together, from its /metrics.
func statusWrites(t *testing.T, srv *policyd.Server) int {
	t.Helper()
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "switchyard_policyd_status_writes_total{"); ok {
			_, v, _ := strings.Cut(rest, "} ")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			n += int(f)
		}
	}
	return n
}

// replicas are policyd replicas following the same resources.
type replicas struct {
	e    *apiEnv
	srvs []*policyd.Server
}

func (r replicas) writes() []int {
	out := make([]int, len(r.srvs))
	for i, s := range r.srvs {
		out[i] = statusWrites(r.e.t, s)
	}
	return out
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// settle waits until the replicas stop writing statuses (no write for a
// second), then checks that none comes for quiet more: writes that went
// on, one replica undoing the other's, would be a ping-pong. It returns
// the writes each made since before.
func (r replicas) settle(before []int, quiet time.Duration) []int {
	t := r.e.t
	t.Helper()
	last, since := sum(r.writes()), time.Now()
	testkit.Eventually(t, 20*time.Second, "status writes to settle", func() bool {
		if n := sum(r.writes()); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= time.Second
	})
	time.Sleep(quiet)
	now := r.writes()
	if sum(now) != last {
		t.Fatalf("status writes went on: %d after settling at %d (per replica %v): the replicas undo each other's writes", sum(now), last, now)
	}
	out := make([]int, len(now))
	for i := range now {
		out[i] = now[i] - before[i]
	}
	return out
}

// sameSnapshot checks that the replicas serve the same compiled snapshot
// (their revisions differ: each numbers its own).
func (r replicas) sameSnapshot() {
	t := r.e.t
	t.Helper()
	var first proto.Message
	for i, s := range r.srvs {
		snap, _ := s.Snapshot()
		if snap == nil {
			t.Fatalf("replica %d serves no snapshot", i)
		}
		wire := policy.ToProto(snap, 0)
		wire.CreatedAt = nil
		if first == nil {
			first = wire
		} else if !proto.Equal(first, wire) {
			t.Fatalf("replica %d serves another snapshot than replica 0", i)
		}
	}
}

// waitAll waits for every resource's Accepted condition to be for its
// current generation, with status and reason for name and, for the
// others, others' status.
func (e *apiEnv) waitAll(objs []*unstructured.Unstructured, name string, status metav1.ConditionStatus, reason string, others metav1.ConditionStatus) {
	e.t.Helper()
	for _, u := range objs {
		if u.GetName() == name {
			e.waitAccepted(u.GetKind(), name, status, reason)
			continue
		}
		testkit.Eventually(e.t, 20*time.Second, u.GetKind()+" "+u.GetName()+" observed", func() bool {
			c, gen := e.accepted(u.GetKind(), u.GetName())
			return c != nil && c.ObservedGeneration == gen && c.Status == others
		})
	}
}

// Two policyd replicas with the same permissions (the deploy manifests'
// ClusterRole), as a Deployment of two runs them, write the same Accepted
// conditions and settle: after each change — a worker added, a worker set
// broken, then mended — both serve the same snapshot, the condition is
// the one for the new generation, and the write counters stop growing.
func TestReplicasSettleStatus(t *testing.T) {
	api := kubeapi.Start(t, "policyd")
	installCRDs(t, api)
	grantPolicyd(t, api, "policyd")
	e := &apiEnv{t: t, api: api, admin: api.Dynamic(t, kubeapi.Admin)}
	objs := readManifests(t)
	for _, u := range objs {
		unstructured.RemoveNestedField(u.Object, "metadata", "generation")
		api.ApplyObject(t, "inference", u)
	}
	r := replicas{e: e, srvs: []*policyd.Server{startReplica(t, api, "policyd", "a"), startReplica(t, api, "policyd", "b")}}

	start := time.Now()
	before := r.writes()
	e.waitAll(objs, "", "", "", metav1.ConditionTrue)
	w := r.settle(before, 3*time.Second)
	r.sameSnapshot()
	t.Logf("first sync: %d resources accepted, settled after %s with %v status writes", len(objs), time.Since(start).Round(time.Millisecond), w)

	glm := func(edit func(u *unstructured.Unstructured)) {
		t.Helper()
		u := getResource(t, e.admin, v1alpha1.KindInferenceWorkerSet, "glm-workers")
		edit(u)
		if _, err := e.admin.Resource(v1alpha1.Resources[v1alpha1.KindInferenceWorkerSet]).Namespace("inference").Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name         string
		edit         func(u *unstructured.Unstructured)
		status       metav1.ConditionStatus
		reason       string
		others       metav1.ConditionStatus
		glmEndpoints int64
	}{
		{name: "a worker added", edit: func(u *unstructured.Unstructured) {
			static, _, _ := unstructured.NestedSlice(u.Object, "spec", "static")
			static = append(static, map[string]any{"id": "sim-9", "url": "http://127.0.0.1:8009"})
			_ = unstructured.SetNestedSlice(u.Object, static, "spec", "static")
		}, status: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted, others: metav1.ConditionTrue, glmEndpoints: 2},
		{name: "the worker set broken", edit: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "no-such-pool", "spec", "pool")
		}, status: metav1.ConditionFalse, reason: v1alpha1.ReasonInvalid, others: metav1.ConditionTrue, glmEndpoints: 0},
		{name: "mended", edit: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "sim-gpus", "spec", "pool")
		}, status: metav1.ConditionTrue, reason: v1alpha1.ReasonAccepted, others: metav1.ConditionTrue, glmEndpoints: 2},
	} {
		start := time.Now()
		before := r.writes()
		glm(step.edit)
		e.waitAll(objs, "glm-workers", step.status, step.reason, step.others)
		w := r.settle(before, 2*time.Second)
		r.sameSnapshot()
		if n, _, _ := unstructured.NestedInt64(getResource(t, e.admin, v1alpha1.KindInferenceWorkerSet, "glm-workers").Object, "status", "endpoints"); n != step.glmEndpoints {
			t.Errorf("%s: status.endpoints %d, want %d", step.name, n, step.glmEndpoints)
		}
		t.Logf("%s: settled after %s with %v status writes", step.name, time.Since(start).Round(time.Millisecond), w)
	}
}
