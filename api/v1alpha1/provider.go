package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType is the API an external provider speaks.
// +kubebuilder:validation:Enum=OpenAICompatible;Anthropic
type ProviderType string

// Provider types.
const (
	ProviderOpenAICompatible ProviderType = "OpenAICompatible"
	ProviderAnthropic        ProviderType = "Anthropic"
)

// InferenceProviderSpec describes an external inference endpoint.
type InferenceProviderSpec struct {
	// Type is the API the provider speaks.
	Type ProviderType `json:"type"`
	// BaseURL is the API base, e.g. https://api.openai.com/v1; the gateway
	// appends /chat/completions, /completions or /messages.
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL"`
	// Credentials: where the gateway reads the API key. Only the gateway
	// ever reads it; snapshots carry the reference, never the key.
	// +optional
	Credentials *ProviderCredentials `json:"credentials,omitempty"`
	// Models are the public model names the provider serves, and the name
	// the provider knows each by.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Models []ProviderModel `json:"models"`
	// Pricing is informational and feeds the Price objective.
	// +optional
	Pricing *Pricing `json:"pricing,omitempty"`
}

// ProviderCredentials says where the API key is. Exactly one is set.
// +kubebuilder:validation:MaxProperties=1
type ProviderCredentials struct {
	// SecretRef is a key of a Secret in the provider's namespace
	// (Kubernetes).
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
	// Env is an environment variable of the gateway (local mode).
	// +optional
	Env string `json:"env,omitempty"`
	// File is a file readable by the gateway (local mode).
	// +optional
	File string `json:"file,omitempty"`
}

// SecretKeyRef names one key of a Secret.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:default=apiKey
	// +optional
	Key string `json:"key,omitempty"`
}

// ProviderModel maps a public model name to the provider's own.
type ProviderModel struct {
	// Name is the public model name clients ask for.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// ServedName is the provider's name for it; defaults to Name.
	// +optional
	ServedName string `json:"servedName,omitempty"`
}

// Pricing is a provider's list price.
type Pricing struct {
	// InputPerMillionTokens is the price of a million prompt tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	InputPerMillionTokens float64 `json:"inputPerMillionTokens,omitempty"`
	// OutputPerMillionTokens is the price of a million completion tokens.
	// +kubebuilder:validation:Minimum=0
	// +optional
	OutputPerMillionTokens float64 `json:"outputPerMillionTokens,omitempty"`
	// Currency, e.g. USD.
	// +optional
	Currency string `json:"currency,omitempty"`
}

// InferenceProvider is an external OpenAI-compatible or Anthropic endpoint.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=iprov,categories=switchyard
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Base URL",type=string,JSONPath=`.spec.baseURL`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InferenceProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InferenceProviderSpec `json:"spec"`
	Status Status                `json:"status,omitempty"`
}

// InferenceProviderList is a list of InferenceProviders.
// +kubebuilder:object:root=true
type InferenceProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InferenceProvider `json:"items"`
}
