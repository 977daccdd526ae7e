package kube

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
