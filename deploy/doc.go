// Package deploy holds the Kubernetes manifests (kustomize/, examples/,
// rbac/, nats/) and their tests: every overlay and component renders
// (render_test.go) and meets the rules the service set promises — namespaced,
// restricted pods, probes, resources, graceful termination, least
// privilege, every setting a flag the service has — and is accepted by a
// real API server (apiserver_test.go). It has no Go code of its own.
package deploy
