package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InferencePolicySpec holds ordered routing rules. For a request, the first
// rule whose matches match decides: consider → exclude → select tiers →
// onEmpty (see internal/policy for the full semantics).
type InferencePolicySpec struct {
	// Rules in order; the first matching rule decides.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Rules []PolicyRule `json:"rules"`
}

// PolicyRule is one routing rule.
type PolicyRule struct {
	// Name identifies the rule in decisions, logs and metrics.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// Matches: the rule applies when any entry matches; no entries means
	// every request.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Matches []Match `json:"matches,omitempty"`
	// Route says how a matching request is routed.
	Route Route `json:"route"`
}

// Match matches a request when every key set matches.
// +kubebuilder:validation:MinProperties=1
type Match struct {
	// Model is the model name the client asked for (possibly an alias).
	// +optional
	Model string `json:"model,omitempty"`
	// Tenant is the tenant the gateway identified.
	// +optional
	Tenant string `json:"tenant,omitempty"`
	// Tag is a tag the request carries (header, tenant default, classifier).
	// +optional
	Tag string `json:"tag,omitempty"`
}

// Route is a rule's routing: consider, exclude, select, onEmpty.
type Route struct {
	// Consider widens the candidate set; by default it is every backend
	// serving the requested model. Listing models here is also how an alias
	// is written.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Consider []ConsiderEntry `json:"consider,omitempty"`
	// Exclude drops candidates, in order; each drop is recorded.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Exclude []ExcludeFilter `json:"exclude,omitempty"`
	// Select holds ordered tiers: the first tier with any candidate picks.
	// Empty means one tier minimizing PredictedTTFT over every candidate.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Select []SelectTier `json:"select,omitempty"`
	// OnEmpty: what happens when every tier is empty. Reject fails closed;
	// Fallback (the default) lets the next matching rule, and finally
	// default routing, decide.
	// +optional
	OnEmpty OnEmptyAction `json:"onEmpty,omitempty"`
}

// ConsiderEntry adds backends to the candidate set.
type ConsiderEntry struct {
	// Models adds every backend serving one of the named models.
	// +optional
	Models *ModelNames `json:"models,omitempty"`
}

// ModelNames lists model names.
type ModelNames struct {
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Names []string `json:"names"`
}

// ExcludeFilter drops candidates matching Drop, only when If matches the
// request (always when If is absent).
type ExcludeFilter struct {
	// Name identifies the filter in decisions and Explain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// If restricts the filter to requests that match it.
	// +optional
	If *Match `json:"if,omitempty"`
	// Drop selects the backends to drop: all keys set must hold.
	Drop BackendSelector `json:"drop"`
}

// BackendSelector selects backends by identity and live state; every key
// set must hold.
// +kubebuilder:validation:MinProperties=1
type BackendSelector struct {
	// Backend selects by identity.
	// +optional
	Backend *BackendMatch `json:"backend,omitempty"`
	// QueuedPrompts is the worker's waiting requests (vllm:num_requests_waiting).
	// +optional
	QueuedPrompts *NumberRange `json:"queuedPrompts,omitempty"`
	// RunningRequests is the worker's running requests.
	// +optional
	RunningRequests *NumberRange `json:"runningRequests,omitempty"`
	// InFlight is requests routed to the backend and not yet completed.
	// +optional
	InFlight *NumberRange `json:"inFlight,omitempty"`
	// KVCacheUsage is the worker's KV cache usage, 0..1.
	// +optional
	KVCacheUsage *NumberRange `json:"kvCacheUsage,omitempty"`
	// PredictedTTFT is the predicted time to first token, seconds.
	// +optional
	PredictedTTFT *NumberRange `json:"predictedTTFT,omitempty"`
	// CachedTokens is the request's prompt tokens cached on the backend.
	// +optional
	CachedTokens *NumberRange `json:"cachedTokens,omitempty"`
}

// BackendMatch selects backends by identity.
// +kubebuilder:validation:MinProperties=1
type BackendMatch struct {
	// Type is Local (a vLLM worker) or Provider (an external endpoint).
	// +optional
	Type BackendType `json:"type,omitempty"`
	// Names are InferenceProvider or InferenceWorkerSet names.
	// +optional
	Names []string `json:"names,omitempty"`
	// Models served.
	// +optional
	Models []string `json:"models,omitempty"`
	// Pool is an InferencePool name.
	// +optional
	Pool string `json:"pool,omitempty"`
}

// NumberRange is a numeric predicate; every bound set must hold.
// +kubebuilder:validation:MinProperties=1
type NumberRange struct {
	// +optional
	GreaterThan *float64 `json:"greaterThan,omitempty"`
	// +optional
	GreaterThanOrEqual *float64 `json:"greaterThanOrEqual,omitempty"`
	// +optional
	LessThan *float64 `json:"lessThan,omitempty"`
	// +optional
	LessThanOrEqual *float64 `json:"lessThanOrEqual,omitempty"`
}

// SelectTier filters the remaining candidates and picks one.
type SelectTier struct {
	// Type restricts the tier to Local or Provider backends.
	// +optional
	Type BackendType `json:"type,omitempty"`
	// Minimize picks the candidate with the lowest value of an objective
	// (the default, with PredictedTTFT, when Order is empty too).
	// +optional
	Minimize Objective `json:"minimize,omitempty"`
	// Order lists provider or worker-set names in preference order: the
	// first name with a candidate wins (its lowest predicted TTFT).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Order []string `json:"order,omitempty"`
}

// BackendType is Local or Provider.
// +kubebuilder:validation:Enum=Local;Provider
type BackendType string

// Backend types.
const (
	BackendLocal    BackendType = "Local"
	BackendProvider BackendType = "Provider"
)

// Objective is a quantity a tier minimizes.
// +kubebuilder:validation:Enum=PredictedTTFT;QueuedPrompts;RunningRequests;InFlight;KVCacheUsage;Price
type Objective string

// Objectives.
const (
	ObjectivePredictedTTFT   Objective = "PredictedTTFT"
	ObjectiveQueuedPrompts   Objective = "QueuedPrompts"
	ObjectiveRunningRequests Objective = "RunningRequests"
	ObjectiveInFlight        Objective = "InFlight"
	ObjectiveKVCacheUsage    Objective = "KVCacheUsage"
	ObjectivePrice           Objective = "Price"
)

// OnEmptyAction is what a rule does when every tier is empty.
// +kubebuilder:validation:Enum=Reject;Fallback
type OnEmptyAction string

// OnEmpty actions.
const (
	OnEmptyReject   OnEmptyAction = "Reject"
	OnEmptyFallback OnEmptyAction = "Fallback"
)

// InferencePolicy holds ordered routing rules.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ipol,categories=switchyard
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.rules`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InferencePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferencePolicySpec   `json:"spec"`
	Status InferencePolicyStatus `json:"status,omitempty"`
}

// InferencePolicyStatus is written by policyd.
type InferencePolicyStatus struct {
	Status `json:",inline"`
	// Rules is the number of rules in the serving snapshot.
	// +optional
	Rules int32 `json:"rules,omitempty"`
}

// InferencePolicyList is a list of InferencePolicies.
// +kubebuilder:object:root=true
type InferencePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferencePolicy `json:"items"`
}
