package policy

import (
	"crypto/sha256"
	"time"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/tenantlimit"
)

// This file is the compiled form: what policyd serves (as
// policy.v1.Snapshot) and the router evaluates. Names are resolved, enums
// are small integers, and each rule, filter and tier carries its
// precomputed label so that a decision records them without allocating.

// BackendType is Local or Provider; TypeAny in a tier or filter means
// both.
type BackendType uint8

// Backend types.
const (
	TypeAny BackendType = iota
	TypeLocal
	TypeProvider
)

func (t BackendType) String() string {
	switch t {
	case TypeLocal:
		return "Local"
	case TypeProvider:
		return "Provider"
	}
	return "Any"
}

// Objective is what a tier minimizes.
type Objective uint8

// Objectives (the names are the YAML spellings).
const (
	PredictedTTFT Objective = iota
	QueuedPrompts
	RunningRequests
	InFlight
	KVCacheUsage
	Price
)

var objectiveNames = []string{"PredictedTTFT", "QueuedPrompts", "RunningRequests", "InFlight", "KVCacheUsage", "Price"}

func (o Objective) String() string {
	if int(o) < len(objectiveNames) {
		return objectiveNames[o]
	}
	return "Unknown"
}

// ObjectiveNames lists the objectives a tier may minimize.
func ObjectiveNames() []string { return append([]string(nil), objectiveNames...) }

func parseObjective(s string) (Objective, bool) {
	for i, n := range objectiveNames {
		if n == s {
			return Objective(i), true
		}
	}
	return 0, false
}

// Metric is a live quantity a filter predicate tests.
type Metric uint8

// Metrics (the names are the YAML keys).
const (
	MetricQueuedPrompts Metric = iota
	MetricRunningRequests
	MetricInFlight
	MetricKVCacheUsage
	MetricPredictedTTFT
	MetricCachedTokens
)

var metricNames = []string{"queuedPrompts", "runningRequests", "inFlight", "kvCacheUsage", "predictedTTFT", "cachedTokens"}

func (m Metric) String() string {
	if int(m) < len(metricNames) {
		return metricNames[m]
	}
	return "unknown"
}

// Op is a comparison.
type Op uint8

// Comparisons.
const (
	GreaterThan Op = iota
	GreaterThanOrEqual
	LessThan
	LessThanOrEqual
)

var opNames = []string{">", ">=", "<", "<="}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "?"
}

// OnEmpty is what a rule does when every tier is empty.
type OnEmpty uint8

// OnEmpty actions.
const (
	// Fallback lets the next matching rule decide, and after the last one
	// default routing (every backend serving the requested model, lowest
	// predicted TTFT), guards still applying.
	Fallback OnEmpty = iota
	// Reject fails closed: the request is rejected.
	Reject
)

func (o OnEmpty) String() string {
	if o == Reject {
		return "Reject"
	}
	return "Fallback"
}

// Mode is how a GatewayBackend applies a policy.
type Mode uint8

// Policy modes.
const (
	// ModeRoute: the policy's rules decide, first match wins.
	ModeRoute Mode = iota
	// ModeGuard: the first matching rule's exclusions apply to every
	// decision, and its onEmpty: Reject fails closed; it never picks.
	ModeGuard
)

func (m Mode) String() string {
	if m == ModeGuard {
		return "Guard"
	}
	return "Route"
}

// Match matches a request when every non-empty field matches.
type Match struct {
	Model, Tenant, Tag string
}

// Predicate is metric op value.
type Predicate struct {
	Metric Metric
	Op     Op
	Value  float64
}

// Filter drops backends matching every set selector, when If (if any)
// matches the request.
type Filter struct {
	Name       string
	If         *Match
	Type       BackendType
	Names      []string // provider or worker-set names
	Models     []string
	Pool       string
	Predicates []Predicate

	ref string // "policy/rule/filter"
}

// Ref is the filter's "policy/rule/filter" label.
func (f *Filter) Ref() string { return f.ref }

// Tier filters by Type and picks by Order (first name with a candidate)
// or by the lowest Minimize.
type Tier struct {
	Type     BackendType
	Minimize Objective
	Order    []string

	label string
}

// Label renders the tier, e.g. "select[1] Provider order [bedrock databricks]".
func (t *Tier) Label() string { return t.label }

// Rule is one compiled routing rule.
type Rule struct {
	Policy   string
	Name     string
	Matches  []Match
	Consider []string // models; empty means the requested model
	Filters  []Filter
	Tiers    []Tier
	OnEmpty  OnEmpty

	label string // "policy/rule"
}

// Label is "policy/rule".
func (r *Rule) Label() string { return r.label }

// Policy is a compiled InferencePolicy.
type Policy struct {
	Namespace, Name string
	Rules           []*Rule
}

// PolicyRef is a policy as a GatewayBackend applies it.
type PolicyRef struct {
	Name string
	Mode Mode
}

// TenantTags are a tenant's default tags.
type TenantTags struct {
	Tenant string
	Tags   []string
}

// Program is one GatewayBackend's routing: its policies in order and its
// tag settings. The implicit program (no GatewayBackend in the snapshot)
// has an empty Name and applies every policy, by name, as Route.
type Program struct {
	Namespace, Name string
	Models          []string // public model names; empty means any
	Policies        []PolicyRef
	AuthMode        string
	TagsHeader      string
	AllowedTags     []string
	Tenants         []TenantTags
	// AuthTenants are the tenants that may call with AuthMode APIKey or
	// JWT and their keys' digests.
	AuthTenants []AuthTenant
	// JWT is the identity provider whose bearer JWTs name a tenant of
	// AuthTenants (spec.auth.jwt); nil: JWTs are not accepted.
	JWT *JWTAuth
	// Classifiers are the external classifiers the router asks
	// (spec.classifiers), defaults applied.
	Classifiers []ExternalClassifier
	// PII are the backend's own kinds of personal data (spec.pii); nil:
	// none.
	PII *PIIRules

	route    []*Rule   // Route rules, evaluation order
	guards   [][]*Rule // each Guard policy's rules
	byModel  map[string][]int32
	anyModel []int32
	tenants  map[string][]string
	keys     map[[sha256.Size]byte]keyEntry // by key digest
	limits   map[string]tenantlimit.Tenant  // by tenant, those with limits
	flows    map[string]TenantFlow          // by tenant, every AuthTenant
	// tenantAllowed are the tenants' AllowedTags, for those that have.
	tenantAllowed map[string][]string
	// authTenants are AuthTenants' names.
	authTenants map[string]bool
}

// JWTAuth is a GatewayBackend's spec.auth.jwt, defaults applied.
type JWTAuth struct {
	Issuer      string
	Audiences   []string // a token's aud contains one of them
	TenantClaim string
	JWKSURL     string
	ClockSkew   time.Duration
	Refresh     time.Duration // how often the JWKS is fetched again
}

// Defaults of spec.auth.jwt's optional fields.
const (
	DefaultJWTTenantClaim = "tenant"
	DefaultJWTClockSkew   = time.Minute
	DefaultJWTRefresh     = 5 * time.Minute
)

// Credentials are the kinds of credentials a program accepts, by the
// auth mode name that asks for each: "APIKey" with mode APIKey, "JWT"
// with mode JWT or an identity provider in JWT; none with mode None. A
// gateway must check every one (admission.Authenticator), or refuse
// every request: accepted means enforced.
func (p *Program) Credentials() []string {
	var out []string
	if p.AuthMode == string(v1alpha1.AuthAPIKey) {
		out = append(out, string(v1alpha1.AuthAPIKey))
	}
	if p.AuthMode == string(v1alpha1.AuthJWT) || (p.JWT != nil && p.AuthMode != string(v1alpha1.AuthNone)) {
		out = append(out, string(v1alpha1.AuthJWT))
	}
	if len(out) == 0 && p.AuthMode != string(v1alpha1.AuthNone) {
		out = append(out, p.AuthMode) // a mode this build does not know: no step checks it
	}
	return out
}

// IsAuthTenant reports whether tenant is one of AuthTenants.
func (p *Program) IsAuthTenant(tenant string) bool { return p.authTenants[tenant] }

// TenantLimits returns tenant's limits from spec.tenants[].limits; false
// when it has none there.
func (p *Program) TenantLimits(tenant string) (tenantlimit.Tenant, bool) {
	if p == nil {
		return tenantlimit.Tenant{}, false
	}
	t, ok := p.limits[tenant]
	return t, ok
}

// AuthTenant is a tenant, the SHA-256 digests of its API keys and its
// rate limits (zero: none).
type AuthTenant struct {
	Name   string
	Keys   [][sha256.Size]byte
	Limits tenantlimit.Tenant
	// AllowedTags narrow the program's for this tenant; empty: the
	// program's alone.
	AllowedTags []string
	// Flow is the tenant's share and classes in the gateway's queue.
	Flow TenantFlow
}

// TenantFlow is a tenant's share and classes in the gateway's flow
// control (spec.tenants[].weight, priority, maxPriority).
type TenantFlow struct {
	// Weight is the tenant's share within a class, at least 1.
	Weight int32
	// Priority is the class of its requests, MaxPriority the highest one
	// a request may ask for; both v1alpha1.Priority values, never empty.
	Priority, MaxPriority v1alpha1.Priority
}

// DefaultTenantFlow is a tenant's when its entry sets nothing, and tenant
// "default"'s (auth mode None).
var DefaultTenantFlow = TenantFlow{Weight: 1, Priority: v1alpha1.PriorityStandard, MaxPriority: v1alpha1.PriorityStandard}

// TenantFlow returns tenant's share and classes; DefaultTenantFlow for a
// tenant the program does not list, or a nil program.
func (p *Program) TenantFlow(tenant string) TenantFlow {
	if p == nil {
		return DefaultTenantFlow
	}
	if f, ok := p.flows[tenant]; ok {
		return f
	}
	return DefaultTenantFlow
}

// compileFlow is a tenant entry's flow settings with defaults filled in.
func compileFlow(t *v1alpha1.Tenant) TenantFlow {
	f := TenantFlow{Weight: max(1, t.Weight), Priority: t.Priority, MaxPriority: t.MaxPriority}
	return f.withDefaults()
}

func (f TenantFlow) withDefaults() TenantFlow {
	f.Weight = max(1, f.Weight)
	if f.Priority == "" {
		f.Priority = v1alpha1.PriorityStandard
	}
	if f.MaxPriority == "" || f.MaxPriority.Rank() < f.Priority.Rank() {
		f.MaxPriority = f.Priority
	}
	return f
}

// WorkerSet is a compiled InferenceWorkerSet.
type WorkerSet struct {
	Namespace, Name string
	Model           string
	Pool            string
	Service         string
	Port            int32
	MetricsPath     string
	BlockSize       int32
	KVEventsPort    int32
	KVReplayPort    int32
	KVTopic         string
	Static          []StaticWorker
}

// StaticWorker is a worker at a fixed address.
type StaticWorker struct {
	ID, URL                            string
	KVEventsEndpoint, KVReplayEndpoint string
}

// Pool is a compiled InferencePool.
type Pool struct {
	Namespace, Name         string
	ScrapeInterval          time.Duration
	PrefillTokensPerSecond  float64
	SecondsPerQueuedRequest float64
	MaxQueuedPrompts        int32
	MaxKVCacheUsage         float64
}

// Provider is a compiled InferenceProvider. Credentials are a reference;
// the key itself is never in a snapshot.
type Provider struct {
	Namespace, Name string
	Type            string // OpenAICompatible, Anthropic, Bedrock, AzureOpenAI or Databricks
	BaseURL         string
	Models          []ProviderModel
	Credentials     Credentials
	// Settings are the type's own settings (spec.bedrock, ...): the
	// members of the types the provider is not are empty.
	Settings ProviderSettings
	// Prices per million tokens.
	InputPrice, OutputPrice float64
	Currency                string
	// MaxConcurrency is spec.maxConcurrency: the most requests in flight
	// to the provider across the routers; 0: no cap.
	MaxConcurrency int32
	// Breaker is spec.circuitBreaker; its zero fields take the router's
	// defaults.
	Breaker Breaker
}

// Breaker is a provider's circuit-breaker thresholds as written: zero
// means the router's default (--breaker-failures, --breaker-open-for).
type Breaker struct {
	// Failures is the failed attempts in a row that open the circuit.
	Failures int32
	// OpenFor is how long an open circuit waits before a probe.
	OpenFor time.Duration
}

// ProviderSettings are the settings one provider type reads. Each type
// that has settings adds its members here, named after the type, and
// zero for every other type.
type ProviderSettings struct {
	// BedrockRegion is a Bedrock provider's spec.bedrock.region.
	BedrockRegion string
	// AzureAPIVersion is an AzureOpenAI provider's spec.azure.apiVersion.
	AzureAPIVersion string
	// AzureEntra is an AzureOpenAI provider's spec.azure.entra; nil: the
	// resource's API key in Credentials.
	AzureEntra *AzureEntra
	// DatabricksOAuth is a Databricks provider's spec.databricks.oauth;
	// nil: a personal access token in Credentials.
	DatabricksOAuth *DatabricksOAuth
}

// DatabricksOAuth is a Databricks service principal's OAuth client: its
// id, and the Secret key holding its secret (never the secret).
type DatabricksOAuth struct {
	ClientID              string
	SecretName, SecretKey string
}

// AzureEntra is a Microsoft Entra ID application's client credentials:
// its tenant, id and authority host (defaulted, no trailing slash), and
// the Secret key holding its secret (never the secret).
type AzureEntra struct {
	TenantID, ClientID    string
	AuthorityHost         string
	SecretName, SecretKey string
}

// DefaultEntraAuthorityHost is the authority host of Entra ID's global
// cloud, spec.azure.entra.authorityHost's default.
const DefaultEntraAuthorityHost = "https://login.microsoftonline.com"

// ProviderModel maps a public model name to the provider's.
type ProviderModel struct{ Name, ServedName string }

// Credentials says where the gateway finds a provider's API key.
type Credentials struct {
	SecretName, SecretKey string
	Env, File             string
}

// ServedName is the provider's name for a public model, and whether the
// provider serves it.
func (p *Provider) ServedName(model string) (string, bool) {
	for _, m := range p.Models {
		if m.Name == model {
			return m.ServedName, true
		}
	}
	return "", false
}
