// Package v1alpha1 holds Switchyard's Kubernetes API types, group
// switchyard.dev, version v1alpha1: InferenceWorkerSet, InferencePool,
// InferenceProvider, InferencePolicy and GatewayBackend.
//
// The CRD manifests under deploy/kustomize/base/crds and the deep-copy
// methods in zz_generated.deepcopy.go are generated from these types by
// controller-gen (pinned in tools/go.mod); run `go generate ./api/...` after
// changing them. The same types are what internal/policy parses from YAML
// files in local mode, so the language has one definition.
//
// +kubebuilder:object:generate=true
// +groupName=switchyard.dev
package v1alpha1

//go:generate sh -c "cd ../.. && GOWORK=off go tool -modfile=tools/go.mod controller-gen object paths=./api/... crd:allowDangerousTypes=true,maxDescLen=400 output:crd:dir=deploy/kustomize/base/crds"
