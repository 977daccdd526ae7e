package kube

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"

	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/testkit"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

func keySecret(name string, keys ...string) *unstructured.Unstructured {
	data := map[string]any{}
	for _, k := range keys {
		d := apikey.Digest(k)
		data["key-"+d[7:23]] = base64.StdEncoding.EncodeToString([]byte(d))
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": name, "namespace": "inference"},
		"data":     data,
	}}
}

func keyedBackend() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "switchyard.dev/v1alpha1", "kind": "GatewayBackend",
		"metadata": map[string]any{"name": "front", "namespace": "inference", "generation": int64(1)},
		"spec": map[string]any{
			"auth":    map[string]any{"mode": "APIKey"},
			"tenants": []any{map[string]any{"name": "team-a", "keysSecret": "team-a-keys"}},
		},
	}}
}

// TestKeySecrets: the digests of the Secret a tenant names reach the
// snapshot; a key removed from the Secret, then the Secret deleted, stop
// naming the tenant within the re-read interval, without any change to
// the GatewayBackend.
func TestKeySecrets(t *testing.T) {
	k1, k2 := apikey.Generate(), apikey.Generate()
	e := startKube(t, []*unstructured.Unstructured{keyedBackend(), keySecret("team-a-keys", k1, k2)},
		func(c *policyd.Config) { c.KeySecretsInterval = 10 * time.Millisecond })
	tenantOf := func(key string) string {
		snap, _ := e.srv.Snapshot()
		if snap == nil || snap.Program("front") == nil {
			return "<no snapshot>"
		}
		tenant, _ := snap.Program("front").KeyTenant(sha256.Sum256([]byte(key)))
		return tenant
	}
	testkit.Eventually(t, 10*time.Second, "both keys served", func() bool { return tenantOf(k1) == "team-a" && tenantOf(k2) == "team-a" })

	secrets := e.client.Resource(secretsGVR).Namespace("inference")
	if _, err := secrets.Update(context.Background(), keySecret("team-a-keys", k1), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "k2 revoked", func() bool { return tenantOf(k2) == "" })
	if tenantOf(k1) != "team-a" {
		t.Fatal("revoking k2 revoked k1")
	}
	if err := secrets.Delete(context.Background(), "team-a-keys", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the deleted Secret's keys revoked", func() bool { return tenantOf(k1) == "" })
	snap, _ := e.srv.Snapshot()
	if snap.Program("front").AuthKeys() != 0 {
		t.Errorf("%d keys served after the Secret was deleted", snap.Program("front").AuthKeys())
	}
}

// TestKeySecretForbidden: a Secret policyd may not read refuses its
// GatewayBackend with a condition that says what permission is missing,
// and nothing of the Secret is served.
func TestKeySecretForbidden(t *testing.T) {
	e := startKube(t, []*unstructured.Unstructured{keyedBackend(), keySecret("team-a-keys", apikey.Generate())},
		func(c *policyd.Config) { c.KeySecretsInterval = 10 * time.Millisecond })
	e.client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "team-a-keys", errors.New("no RBAC"))
	})
	// Edit the backend so the next compile reads the Secret again.
	e.edit(v1alpha1.KindGatewayBackend, "front", func(u *unstructured.Unstructured) {})
	c := e.waitCondition(v1alpha1.KindGatewayBackend, "front", metav1.ConditionFalse, v1alpha1.ReasonInvalid, 2)
	if !strings.Contains(c.Message, "Secret inference/team-a-keys: forbidden: policyd's service account needs get on this Secret") {
		t.Errorf("condition message %q", c.Message)
	}
}
