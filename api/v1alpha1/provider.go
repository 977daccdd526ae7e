package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType is the API an external provider speaks.
// +kubebuilder:validation:Enum=OpenAICompatible;Anthropic;Bedrock
type ProviderType string

// Provider types.
const (
	ProviderOpenAICompatible ProviderType = "OpenAICompatible"
	ProviderAnthropic        ProviderType = "Anthropic"
	// ProviderBedrock is Amazon Bedrock's Converse API, signed with AWS
	// SigV4; its settings are in spec.bedrock.
	ProviderBedrock ProviderType = "Bedrock"
)

// InferenceProviderSpec describes an external inference endpoint.
// Settings only one type reads are in a member named after the type
// (spec.bedrock), set only for that type.
// +kubebuilder:validation:XValidation:rule="self.type == 'Bedrock' ? has(self.bedrock) : !has(self.bedrock)",message="spec.bedrock is required for type Bedrock, and only for type Bedrock"
type InferenceProviderSpec struct {
	// Type is the API the provider speaks.
	Type ProviderType `json:"type"`
	// BaseURL is the API base, e.g. https://api.openai.com/v1; the gateway
	// appends /chat/completions, /completions or /messages. For Bedrock it
	// is the runtime endpoint, https://bedrock-runtime.<region>.amazonaws.com
	// (the gateway appends /model/<id>/converse).
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL"`
	// Credentials: where the gateway reads the API key. Only the gateway
	// ever reads it; snapshots carry the reference, never the key. For
	// Bedrock, omit it to use the AWS default credential chain (the
	// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY environment, a web identity
	// token file as IRSA mounts it, the shared config files), or name a
	// Secret (secretRef; its key is not used) or a directory (file) holding
	// the files accessKeyId, secretAccessKey and optionally sessionToken.
	// +optional
	Credentials *ProviderCredentials `json:"credentials,omitempty"`
	// Bedrock holds the settings of a provider of type Bedrock; required
	// for that type and refused for the others.
	// +optional
	Bedrock *BedrockProvider `json:"bedrock,omitempty"`
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

// BedrockProvider is the settings of an Amazon Bedrock provider.
type BedrockProvider struct {
	// Region is the AWS region requests are signed for, e.g. us-east-1.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +kubebuilder:validation:MaxLength=32
	Region string `json:"region"`
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

// InferenceProvider is an external OpenAI-compatible, Anthropic or Amazon
// Bedrock endpoint.
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
