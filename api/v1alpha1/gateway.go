package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayBackendSpec is what a gateway serves and which policies apply.
type GatewayBackendSpec struct {
	// Models are the public model names, served models and aliases alike;
	// the gateway lists them on /v1/models. Empty means every model some
	// backend serves.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Models []PublicModel `json:"models,omitempty"`
	// Policies apply in this order: the first matching rule of a Route
	// policy decides; every Guard policy's exclusions apply to all
	// decisions. Empty means every InferencePolicy, by name, as Route.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Policies []PolicyRef `json:"policies,omitempty"`
	// Auth is how clients authenticate.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`
	// Tenants are who may call when auth.mode is APIKey or JWT, each with
	// its keys (APIKey) or named by a JWT's tenant claim (auth.jwt). A
	// request's tenant comes only from its key or its verified token: no
	// header chooses it. Listing tenants with auth.mode None is refused
	// (nothing would check their callers), and so are keys with mode JWT.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	Tenants []Tenant `json:"tenants,omitempty"`
	// Tags configures request tags from clients and tenant defaults.
	// +optional
	Tags *TagsSpec `json:"tags,omitempty"`
	// Classifiers are external services the router asks which tags a
	// request's prompt carries (Presidio, a team's own model), beside its
	// built-in classifiers. Each runs only when a policy reads one of its
	// tags.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Classifiers []ExternalClassifier `json:"classifiers,omitempty"`
	// PII adds this backend's own kinds of personal data to the router's
	// PII classifier: a prompt holding one is tagged pii-detected and
	// pii:<kind>, like the built-in kinds (e-mail, card, ...). Used only
	// when a policy reads those tags.
	// +optional
	PII *PIISpec `json:"pii,omitempty"`
}

// PIISpec is an operator's own kinds of personal data.
type PIISpec struct {
	// Patterns are regular expressions (Go's RE2 syntax: no
	// backreferences or lookaround, linear in the text), each matched
	// against whole words of the prompt: the text is cut at whitespace
	// and where ASCII meets other scripts, a word's surrounding brackets,
	// quotes and sentence marks are trimmed, and the pattern must match
	// all of what remains (EMP-[0-9]{6} finds "(EMP-123456)." and
	// 社員番号EMP-123456です, not EMP-1234567). Case-sensitive unless the
	// pattern starts with (?i). A pattern that could match whitespace or
	// the empty word is refused.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Patterns []PIIPattern `json:"patterns,omitempty"`
	// Dictionaries are lists of terms (words or phrases) found anywhere
	// in the prompt, ignoring case and how much whitespace separates a
	// phrase's words. A term starting or ending with an ASCII letter or
	// digit must stand on its own there ("falcon" does not match
	// "falconry"); other scripts match inside words (山田太郎 in
	// 患者山田太郎さん). At most 10000 terms in all.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Dictionaries []PIIDictionary `json:"dictionaries,omitempty"`
}

// PIIPattern is one regular expression under a kind.
type PIIPattern struct {
	// Kind names what it finds: a request holding a match is tagged
	// pii:<kind> (and pii-detected).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Regex is the expression a whole word must match.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Regex string `json:"regex"`
}

// PIIDictionary is a list of terms under a kind.
type PIIDictionary struct {
	// Kind names what it finds: a request holding a term is tagged
	// pii:<kind> (and pii-detected).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Terms are the words and phrases, up to 256 bytes each.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=256
	Terms []string `json:"terms"`
}

// ExternalClassifier is a classifier served over HTTP: the router POSTs
// {"text": the prompt's text, "model": ..., "tenant": ...} as JSON to URL
// and expects {"tags": [...]} back within Timeout.
type ExternalClassifier struct {
	// Name identifies it in metrics and logs.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// URL is the classifier's endpoint.
	// +kubebuilder:validation:Pattern=`^https?://`
	URL string `json:"url"`
	// Tags are the tags it may return; any other it returns is dropped.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Tags []string `json:"tags"`
	// Timeout bounds each call, queueing for a free slot included.
	// +kubebuilder:default="200ms"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxConcurrency bounds the calls in flight from one router.
	// +kubebuilder:default=16
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	MaxConcurrency int32 `json:"maxConcurrency,omitempty"`
	// FailTag is the tag a request carries when the classifier fails or
	// times out, so a policy guarding on it rejects or keeps the request
	// local rather than let it leak (fail closed).
	// +kubebuilder:default=pii-detected
	// +optional
	FailTag string `json:"failTag,omitempty"`
}

// PublicModel is one public model name.
type PublicModel struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Description is shown to clients.
	// +optional
	Description string `json:"description,omitempty"`
}

// PolicyRef names an InferencePolicy and how it applies.
type PolicyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Mode is Route (its rules decide) or Guard (only its exclusions
	// apply, to every decision, and its onEmpty: Reject fails closed).
	// +kubebuilder:default=Route
	// +optional
	Mode PolicyMode `json:"mode,omitempty"`
}

// PolicyMode is how a policy applies.
// +kubebuilder:validation:Enum=Route;Guard
type PolicyMode string

// Policy modes.
const (
	PolicyModeRoute PolicyMode = "Route"
	PolicyModeGuard PolicyMode = "Guard"
)

// AuthSpec is how clients authenticate to the gateway.
type AuthSpec struct {
	// Mode: None (no credentials; every request is tenant "default"),
	// APIKey (every request carries a key of one of spec.tenants, as
	// "Authorization: Bearer sy-..." or "x-api-key: sy-..."; with jwt set,
	// a bearer JWT of that identity provider is accepted too) or JWT
	// (every request carries a bearer JWT of the identity provider in jwt;
	// API keys are refused). A request without acceptable credentials is
	// refused 401 and never forwarded.
	// +kubebuilder:default=None
	Mode AuthMode `json:"mode"`
	// JWT names the identity provider whose bearer JWTs authenticate
	// callers: required with mode JWT, optional with APIKey (keys and JWTs
	// both accepted), refused with None (nothing would check them).
	// +optional
	JWT *JWTAuth `json:"jwt,omitempty"`
}

// JWTAuth is an OIDC identity provider whose bearer JWTs name the
// caller's tenant. A token is accepted when it is signed with RS256,
// ES256 or EdDSA by a key of the JWKS at JWKSURL (chosen by its kid),
// carries Issuer and one of Audiences, has an exp that has not passed
// (with ClockSkew), and its TenantClaim names one of spec.tenants: the
// IdP says who is calling, the GatewayBackend which tenants exist (their
// limits and allowedTags apply as to a key's tenant; a tenant reached
// only through JWTs lists no key).
//
// The keys come from a URL only. A JWKS path would name a file on each
// gateway's disk, which neither policyd nor this resource's author can
// see; and a JWKS copied into a Secret or ConfigMap must be copied again
// by hand at each of the IdP's key rotations, the outage a URL avoids.
// A gateway run on its own (without policyd) can still read a file
// (its --jwt-jwks-file flag), and a JWKS kept as a file can be served to
// the gateways from a sidecar on loopback (http://127.0.0.1:PORT/...).
type JWTAuth struct {
	// Issuer is the iss every token must carry, exactly (an OIDC
	// provider's issuer URL, e.g. https://login.example.com/).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer"`
	// Audiences: a token's aud must contain one of them (the client id or
	// API identifier the IdP issues the tokens for).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=set
	Audiences []string `json:"audiences"`
	// TenantClaim names the token's string claim holding the tenant, one
	// of spec.tenants' names.
	// +kubebuilder:default=tenant
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	TenantClaim string `json:"tenantClaim,omitempty"`
	// JWKSURL is where the IdP publishes its public keys (its OIDC
	// discovery's jwks_uri): https, or http to a loopback address only (a
	// sidecar). Fetched when the gateway gets this resource, every
	// refreshInterval, and on a token signed with a kid it does not know
	// (at most once per the gateway's --jwt-min-refresh), so a key the IdP
	// rotates in is accepted at once.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(https://[^/?#@]+|http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?)([/?].*)?$`
	JWKSURL string `json:"jwksURL"`
	// ClockSkew is the leeway on exp, nbf and iat, 0 to 10m (default 1m).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	ClockSkew *metav1.Duration `json:"clockSkew,omitempty"`
	// RefreshInterval is how often the JWKS is fetched again, 10s to 24h
	// (default 5m).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
}

// Tenant is one tenant and its API keys. Keys are never stored, only
// their SHA-256 digests ("sha256:" and 64 lowercase hex digits), as
// `yardctl keys create` prints them. Without auth.jwt, a tenant without
// keys (its last one revoked) is accepted with a warning: it cannot call.
// With auth.jwt, a tenant needs no key: tokens naming it reach it.
type Tenant struct {
	// Name is the tenant: policies match it (match.tenants), usage events
	// and tenant tags use it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`
	Name string `json:"name"`
	// KeysSecret names a Secret in the GatewayBackend's namespace whose
	// every data value is one key's digest. policyd's kubernetes source
	// reads exactly the Secrets named here (no other) and follows their
	// changes: a key removed from the Secret stops working within seconds.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	KeysSecret string `json:"keysSecret,omitempty"`
	// KeyDigests lists key digests inline: files mode, where policyd reads
	// no Secrets (and reloads the file when it changes).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:Pattern=`^sha256:[0-9a-f]{64}$`
	KeyDigests []string `json:"keyDigests,omitempty"`
	// AllowedTags narrows the tags this tenant's requests may set through
	// spec.tags.header: a tag must be in this list and in
	// spec.tags.allowed (when that is set). Empty: spec.tags.allowed
	// alone decides.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	AllowedTags []string `json:"allowedTags,omitempty"`
	// Limits are the tenant's rate limits and token budgets, enforced by
	// the gateway's ratelimit admission step across every replica.
	// +optional
	Limits *TenantLimits `json:"limits,omitempty"`
	// Weight is the tenant's share of the fleet while it is saturated
	// (the gateway's flow control, --queue-threshold): within a priority
	// class, waiting requests are released so that each tenant gets
	// prefill tokens in proportion to its weight. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight,omitempty"`
	// Priority is the class of the tenant's requests in the gateway's
	// queue: Critical goes before Standard, Standard before Sheddable,
	// and Sheddable requests are the first refused when the queue is
	// full. Default Standard.
	// +optional
	Priority Priority `json:"priority,omitempty"`
	// MaxPriority is the highest class a request of the tenant may ask for
	// with the X-Switchyard-Priority header (asking higher is refused
	// 403); a request may always ask for a lower one. Default: the
	// tenant's priority.
	// +optional
	MaxPriority Priority `json:"maxPriority,omitempty"`
}

// Priority is a request's class in the gateway's queue.
// +kubebuilder:validation:Enum=Critical;Standard;Sheddable
type Priority string

// Priorities, highest first.
const (
	PriorityCritical  Priority = "Critical"
	PriorityStandard  Priority = "Standard"
	PrioritySheddable Priority = "Sheddable"
)

// Rank orders priorities: Sheddable 0, Standard 1, Critical 2; -1 for an
// unknown value. Empty is Standard.
func (p Priority) Rank() int {
	switch p {
	case PrioritySheddable:
		return 0
	case PriorityStandard, "":
		return 1
	case PriorityCritical:
		return 2
	}
	return -1
}

// TenantLimits are a tenant's rate limits and token budgets; a field left
// out (or 0) is no limit of that kind. Tokens are reserved at admission
// (the prompt plus max_tokens) and corrected with the real usage.
type TenantLimits struct {
	RateLimits `json:",inline"`
	// Models are limits on given models, checked on top of the tenant's.
	// +optional
	// +listType=map
	// +listMapKey=model
	// +kubebuilder:validation:MaxItems=256
	Models []ModelLimits `json:"models,omitempty"`
}

// ModelLimits are a tenant's limits on one model.
type ModelLimits struct {
	// Model is the public model name the request asks for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model      string `json:"model"`
	RateLimits `json:",inline"`
}

// RateLimits are per-minute rates and calendar budgets. Budgets are
// input plus output tokens per UTC day and month, and must not be smaller
// than what the per-minute limits allow in one minute.
type RateLimits struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1099511627776
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1099511627776
	InputTokensPerMinute int64 `json:"inputTokensPerMinute,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1099511627776
	OutputTokensPerMinute int64 `json:"outputTokensPerMinute,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1099511627776
	TokensPerDay int64 `json:"tokensPerDay,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1099511627776
	TokensPerMonth int64 `json:"tokensPerMonth,omitempty"`
}

// AuthMode is the gateway's client authentication.
// +kubebuilder:validation:Enum=None;APIKey;JWT
type AuthMode string

// Auth modes.
const (
	AuthNone   AuthMode = "None"
	AuthAPIKey AuthMode = "APIKey"
	AuthJWT    AuthMode = "JWT"
)

// TagsSpec configures where request tags come from.
type TagsSpec struct {
	// Header carries comma-separated tags from clients; empty disables
	// client tags.
	// +optional
	Header string `json:"header,omitempty"`
	// Allowed lists the tags clients may set; empty means any.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Allowed []string `json:"allowed,omitempty"`
	// Tenants gives tenants default tags.
	// +optional
	// +listType=map
	// +listMapKey=tenant
	Tenants []TenantTags `json:"tenants,omitempty"`
}

// TenantTags are a tenant's default tags.
type TenantTags struct {
	// +kubebuilder:validation:MinLength=1
	Tenant string `json:"tenant"`
	// +kubebuilder:validation:MinItems=1
	Tags []string `json:"tags"`
}

// GatewayBackend is what a gateway serves.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gwb,categories=switchyard
// +kubebuilder:printcolumn:name="Policies",type=string,JSONPath=`.spec.policies[*].name`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type GatewayBackend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GatewayBackendSpec `json:"spec,omitempty"`
	Status Status             `json:"status,omitempty"`
}

// GatewayBackendList is a list of GatewayBackends.
// +kubebuilder:object:root=true
type GatewayBackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GatewayBackend `json:"items"`
}
