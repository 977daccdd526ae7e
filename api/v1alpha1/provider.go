package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType is the API an external provider speaks.
// +kubebuilder:validation:Enum=OpenAICompatible;Anthropic;Bedrock;AzureOpenAI;Databricks
type ProviderType string

// Provider types.
const (
	ProviderOpenAICompatible ProviderType = "OpenAICompatible"
	ProviderAnthropic        ProviderType = "Anthropic"
	// ProviderBedrock is Amazon Bedrock's Converse API, signed with AWS
	// SigV4; its settings are in spec.bedrock.
	ProviderBedrock ProviderType = "Bedrock"
	// ProviderAzureOpenAI is Azure OpenAI Service: OpenAI's API on a
	// deployment's path, with an api-version query, authenticated with the
	// resource's API key (the api-key header) or a Microsoft Entra ID
	// application's tokens (spec.azure.entra; a bearer token); its settings
	// are in spec.azure.
	ProviderAzureOpenAI ProviderType = "AzureOpenAI"
	// ProviderDatabricks is Databricks Model Serving's OpenAI-compatible
	// API, authenticated with a personal access token or OAuth
	// machine-to-machine (spec.databricks.oauth).
	ProviderDatabricks ProviderType = "Databricks"
)

// InferenceProviderSpec describes an external inference endpoint.
// Settings only one type reads are in a member named after the type
// (spec.bedrock, spec.azure, spec.databricks), set only for that type.
// +kubebuilder:validation:XValidation:rule="self.type == 'Bedrock' ? has(self.bedrock) : !has(self.bedrock)",message="spec.bedrock is required for type Bedrock, and only for type Bedrock"
// +kubebuilder:validation:XValidation:rule="self.type == 'AzureOpenAI' ? has(self.azure) : !has(self.azure)",message="spec.azure is required for type AzureOpenAI, and only for type AzureOpenAI"
// +kubebuilder:validation:XValidation:rule="self.type != 'AzureOpenAI' || has(self.credentials) != (has(self.azure) && has(self.azure.entra))",message="type AzureOpenAI needs exactly one of spec.credentials (the resource's API key) or spec.azure.entra (a Microsoft Entra ID application)"
// +kubebuilder:validation:XValidation:rule="self.type == 'Databricks' || !has(self.databricks)",message="spec.databricks is only for type Databricks"
// +kubebuilder:validation:XValidation:rule="!has(self.databricks) || !has(self.databricks.oauth) || !has(self.credentials)",message="a Databricks provider authenticates with spec.credentials (a personal access token) or spec.databricks.oauth, not both"
// +kubebuilder:validation:XValidation:rule="self.type != 'Databricks' || has(self.credentials) || (has(self.databricks) && has(self.databricks.oauth))",message="type Databricks needs spec.credentials (a personal access token) or spec.databricks.oauth"
type InferenceProviderSpec struct {
	// Type is the API the provider speaks.
	Type ProviderType `json:"type"`
	// BaseURL is the API base, e.g. https://api.openai.com/v1; the gateway
	// appends /chat/completions, /completions or /messages. For Bedrock it
	// is the runtime endpoint, https://bedrock-runtime.<region>.amazonaws.com
	// (the gateway appends /model/<id>/converse). For AzureOpenAI it is the
	// resource's endpoint, https://<resource>.openai.azure.com (the gateway
	// appends /openai/deployments/<servedName>/chat/completions). For
	// Databricks it is the workspace's https://<workspace>/serving-endpoints
	// (the gateway appends /chat/completions or /completions).
	// +kubebuilder:validation:Pattern=`^https?://`
	BaseURL string `json:"baseURL"`
	// Credentials: where the gateway reads the API key. Only the gateway
	// ever reads it; snapshots carry the reference, never the key. For
	// Bedrock, omit it to use the AWS default credential chain (the
	// AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY environment, a web identity
	// token file as IRSA mounts it, the shared config files), or name a
	// Secret (secretRef; its key is not used) or a directory (file) holding
	// the files accessKeyId, secretAccessKey and optionally sessionToken.
	// For AzureOpenAI it is the resource's API key, sent as the api-key
	// header; omit it when spec.azure.entra is set (exactly one of the two).
	// For
	// Databricks it is a personal access token, sent as a bearer token;
	// omit it when spec.databricks.oauth is set.
	// +optional
	Credentials *ProviderCredentials `json:"credentials,omitempty"`
	// Bedrock holds the settings of a provider of type Bedrock; required
	// for that type and refused for the others.
	// +optional
	Bedrock *BedrockProvider `json:"bedrock,omitempty"`
	// Azure holds the settings of a provider of type AzureOpenAI; required
	// for that type and refused for the others.
	// +optional
	Azure *AzureOpenAIProvider `json:"azure,omitempty"`
	// Databricks holds the settings of a provider of type Databricks;
	// optional for that type and refused for the others.
	// +optional
	Databricks *DatabricksProvider `json:"databricks,omitempty"`
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
	// MaxConcurrency is the most requests in flight to the provider across
	// the whole fleet of routers (the in-flight count the replicas share
	// over NATS): a provider at its cap is no candidate, as if saturated,
	// so the policy's next choice serves (the next provider of an order,
	// the next tier, onEmpty). Unset: no cap. A request counts from its
	// routing decision until its gateway reports it done (or the router's
	// --inflight-ttl passes).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`
	// CircuitBreaker sets the thresholds of the provider's circuit
	// breaker; unset fields take the router's --breaker-failures and
	// --breaker-open-for.
	// +optional
	CircuitBreaker *ProviderCircuitBreaker `json:"circuitBreaker,omitempty"`
}

// ProviderCircuitBreaker is a provider's circuit-breaker thresholds. The
// routers keep the circuit: after Failures failed attempts in a row (no
// connection, a timeout before the first byte, a 429 or 5xx, as the
// gateways report them) it opens and the provider is no candidate; after
// OpenFor one request probes it, and its success closes the circuit.
type ProviderCircuitBreaker struct {
	// Failures is the failed attempts in a row that open the circuit, 1 to
	// 1000 (default: the router's --breaker-failures, 5).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Failures *int32 `json:"failures,omitempty"`
	// OpenFor is how long an open circuit waits before a probe, 1s to 1h
	// (default: the router's --breaker-open-for, 30s).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="openFor must be 1s to 1h"
	// +optional
	OpenFor *metav1.Duration `json:"openFor,omitempty"`
}

// BedrockProvider is the settings of an Amazon Bedrock provider.
type BedrockProvider struct {
	// Region is the AWS region requests are signed for, e.g. us-east-1.
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[a-z]+)+-[0-9]+$`
	// +kubebuilder:validation:MaxLength=32
	Region string `json:"region"`
}

// AzureOpenAIProvider is the settings of an Azure OpenAI Service
// provider. The deployment a request goes to is the model's servedName.
type AzureOpenAIProvider struct {
	// APIVersion is the api-version query parameter of every request, e.g.
	// 2024-10-21 (GA) or 2025-01-01-preview. Streamed usage needs a version
	// that knows stream_options: 2024-10-21 or later.
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$`
	// +kubebuilder:validation:MaxLength=32
	APIVersion string `json:"apiVersion"`
	// Entra makes the gateway authenticate as a Microsoft Entra ID
	// application (a service principal with the Cognitive Services OpenAI
	// User role on the resource) instead of with the API key in
	// spec.credentials.
	// +optional
	Entra *AzureEntraAuth `json:"entra,omitempty"`
}

// AzureEntraAuth is a Microsoft Entra ID application's client credentials.
// The gateway gets an access token from
// {authorityHost}/{tenantID}/oauth2/v2.0/token (the OAuth 2.0 client
// credentials grant, scope https://cognitiveservices.azure.com/.default),
// caches it until shortly before it expires, and sends it as
// Authorization: Bearer instead of api-key. A static token in
// spec.credentials would expire within hours; this is how a token keeps
// being valid.
type AzureEntraAuth struct {
	// TenantID is the directory (tenant) the application is registered
	// in: its id (a GUID) or a verified domain name
	// (contoso.onmicrosoft.com).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$`
	TenantID string `json:"tenantID"`
	// ClientID is the application (client) id.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ClientID string `json:"clientID"`
	// ClientSecretRef is the key of a Secret in the provider's namespace
	// holding the application's client secret (its value, not its id),
	// read by the gateway as it reads API keys.
	ClientSecretRef SecretKeyRef `json:"clientSecretRef"`
	// AuthorityHost is the Entra ID endpoint tokens come from, scheme and
	// host only: https://login.microsoftonline.com (the default, the
	// global cloud), https://login.microsoftonline.us (Azure Government),
	// https://login.chinacloudapi.cn (Azure operated by 21Vianet). http://
	// is admitted for a local test endpoint only: over it the client
	// secret travels in the clear.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^https?://[^/?#@]+/?$`
	// +optional
	AuthorityHost string `json:"authorityHost,omitempty"`
}

// DatabricksProvider is the settings of a Databricks Model Serving
// provider.
type DatabricksProvider struct {
	// OAuth makes the gateway authenticate as a service principal (OAuth
	// machine-to-machine) instead of with a personal access token in
	// spec.credentials.
	// +optional
	OAuth *DatabricksOAuth `json:"oauth,omitempty"`
}

// DatabricksOAuth is a Databricks service principal's OAuth client. The
// gateway gets an access token from https://<workspace>/oidc/v1/token
// (client credentials, scope all-apis) and caches it until shortly before
// it expires.
type DatabricksOAuth struct {
	// ClientID is the service principal's application (client) id.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ClientID string `json:"clientID"`
	// ClientSecretRef is the key of a Secret in the provider's namespace
	// holding the OAuth secret, read by the gateway as it reads API keys.
	ClientSecretRef SecretKeyRef `json:"clientSecretRef"`
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

// InferenceProvider is an external OpenAI-compatible, Anthropic, Amazon
// Bedrock, Azure OpenAI or Databricks endpoint.
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
