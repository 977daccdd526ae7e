package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of every type in this package.
const (
	Group   = "switchyard.dev"
	Version = "v1alpha1"
)

// GroupVersion is switchyard.dev/v1alpha1; APIVersion is its string form as
// it appears in manifests.
var (
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	APIVersion   = GroupVersion.String()
)

// Kinds, and the plural resource names the CRDs register.
const (
	KindInferenceWorkerSet = "InferenceWorkerSet"
	KindInferencePool      = "InferencePool"
	KindInferenceProvider  = "InferenceProvider"
	KindInferencePolicy    = "InferencePolicy"
	KindGatewayBackend     = "GatewayBackend"
)

// Kinds lists every kind in a fixed order (the order policyd loads them in).
var Kinds = []string{KindInferenceWorkerSet, KindInferencePool, KindInferenceProvider, KindInferencePolicy, KindGatewayBackend}

// Resources maps each kind to its group/version/resource, what the dynamic
// client and informers are keyed by.
var Resources = map[string]schema.GroupVersionResource{
	KindInferenceWorkerSet: GroupVersion.WithResource("inferenceworkersets"),
	KindInferencePool:      GroupVersion.WithResource("inferencepools"),
	KindInferenceProvider:  GroupVersion.WithResource("inferenceproviders"),
	KindInferencePolicy:    GroupVersion.WithResource("inferencepolicies"),
	KindGatewayBackend:     GroupVersion.WithResource("gatewaybackends"),
}

// Condition types written to status.conditions by policyd.
const (
	// ConditionAccepted is True when the resource is part of the serving
	// snapshot, False (reason Invalid) when it was rejected.
	ConditionAccepted = "Accepted"
	// ReasonAccepted and ReasonInvalid are the Accepted condition's reasons.
	ReasonAccepted = "Accepted"
	ReasonInvalid  = "Invalid"
)

var (
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&InferenceWorkerSet{}, &InferenceWorkerSetList{},
		&InferencePool{}, &InferencePoolList{},
		&InferenceProvider{}, &InferenceProviderList{},
		&InferencePolicy{}, &InferencePolicyList{},
		&GatewayBackend{}, &GatewayBackendList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Status is the part of every kind's status policyd writes.
type Status struct {
	// ObservedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted (True when in the serving snapshot; False with
	// reason Invalid and the first errors when rejected).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
