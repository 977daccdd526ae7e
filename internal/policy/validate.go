package policy

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/fleet"
	"github.com/switchyard-dev/switchyard/internal/upstream/builtin"
)

// checker accumulates diagnostics.
type checker struct {
	diags Diagnostics
}

func (c *checker) err(o *Object, path, format string, args ...any) {
	c.diags = append(c.diags, o.diag(SeverityError, path, format, args...))
}

func (c *checker) warn(o *Object, path, format string, args ...any) {
	c.diags = append(c.diags, o.diag(SeverityWarning, path, format, args...))
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

var (
	// Kubernetes object names: DNS-1123 subdomains.
	nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	// Tags and rule/filter names: what the gateway accepts in its tags
	// header, and safe as metric labels.
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,64}$`)
	headerRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
	// Tenant names: safe as metric labels and in usage events.
	tenantRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	// API key digests: the CRD's pattern.
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

var (
	backendTypes = []string{string(v1alpha1.BackendLocal), string(v1alpha1.BackendProvider)}
	onEmptyNames = []string{string(v1alpha1.OnEmptyReject), string(v1alpha1.OnEmptyFallback)}
	// crdProviderTypes are the types the CRD schema admits; only those
	// with an adapter (builtin.ProviderTypes) are accepted.
	crdProviderTypes = []string{string(v1alpha1.ProviderOpenAICompatible), string(v1alpha1.ProviderAnthropic), string(v1alpha1.ProviderBedrock),
		string(v1alpha1.ProviderAzureOpenAI), string(v1alpha1.ProviderDatabricks)}

	// awsRegion is the shape of an AWS region (us-east-1, us-gov-west-1),
	// as the CRD's pattern on spec.bedrock.region.
	awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	// azureAPIVersion is the shape of an Azure OpenAI api-version
	// (2024-10-21, 2025-01-01-preview), as the CRD's pattern.
	azureAPIVersion = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?$`)
	// entraTenant is a Microsoft Entra ID tenant: its id (a GUID) or a
	// domain name (contoso.onmicrosoft.com), as the CRD's pattern.
	entraTenant = regexp.MustCompile(`^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$`)
	// entraAuthority is an Entra ID authority host, scheme and host only,
	// as the CRD's pattern.
	entraAuthority = regexp.MustCompile(`^https?://[^/?#@]+/?$`)

	modeNames = []string{string(v1alpha1.PolicyModeRoute), string(v1alpha1.PolicyModeGuard)}
	authModes = []string{string(v1alpha1.AuthNone), string(v1alpha1.AuthAPIKey), string(v1alpha1.AuthJWT)}
)

// validateObject runs the checks that need only the object itself.
func (c *checker) validateObject(o *Object) {
	switch {
	case o.Name == "":
		c.err(o, "metadata.name", "name is required")
	case len(o.Name) > 253 || !nameRE.MatchString(o.Name):
		c.err(o, "metadata.name", "%q is not a valid name (lowercase letters, digits, '-' and '.')", o.Name)
	}
	switch {
	case o.WorkerSet != nil:
		c.validateWorkerSet(o, &o.WorkerSet.Spec)
	case o.Pool != nil:
		c.validatePool(o, &o.Pool.Spec)
	case o.Provider != nil:
		c.validateProvider(o, &o.Provider.Spec)
	case o.Policy != nil:
		c.validatePolicy(o, &o.Policy.Spec)
	case o.Backend != nil:
		c.validateBackend(o, &o.Backend.Spec)
	}
}

func (c *checker) validateWorkerSet(o *Object, s *v1alpha1.InferenceWorkerSetSpec) {
	if strings.TrimSpace(s.Model) == "" {
		c.err(o, "spec.model", "model is required")
	}
	if s.Service == "" && len(s.Static) == 0 {
		c.err(o, "spec", "set service (Kubernetes) or static (fixed addresses)")
	}
	if s.Selector != nil {
		// Accepted means enforced: workers are found through a Service's
		// EndpointSlices; a pod selector nothing reads would route nowhere.
		c.err(o, "spec.selector", "selector is not implemented yet: name the pods' Service in spec.service")
	}
	if s.Port != 0 && (s.Port < 1 || s.Port > 65535) {
		c.err(o, "spec.port", "port %d out of range 1-65535", s.Port)
	}
	if s.BlockSize < 0 || s.BlockSize > 1024 {
		c.err(o, "spec.blockSize", "block size %d out of range 1-1024", s.BlockSize)
	}
	if s.MetricsPath != "" && !strings.HasPrefix(s.MetricsPath, "/") {
		c.err(o, "spec.metricsPath", "must start with /")
	}
	if k := s.KVEvents; k != nil {
		if k.Port < 1 || k.Port > 65535 {
			c.err(o, "spec.kvEvents.port", "port %d out of range 1-65535", k.Port)
		}
		if k.ReplayPort < 0 || k.ReplayPort > 65535 {
			c.err(o, "spec.kvEvents.replayPort", "port %d out of range 0-65535", k.ReplayPort)
		}
	}
	seen := map[string]bool{}
	for i, w := range s.Static {
		p := idx("spec.static", i)
		if err := fleet.ValidateID(w.ID); err != nil {
			c.err(o, p+".id", "endpoint id %v", err)
		} else if seen[w.ID] {
			c.err(o, p+".id", "endpoint id %q listed twice", w.ID)
		}
		seen[w.ID] = true
		if err := checkBaseURL(w.URL); err != nil {
			c.err(o, p+".url", "%v", err)
		}
		for _, e := range []struct{ field, v string }{{"kvEventsEndpoint", w.KVEventsEndpoint}, {"kvReplayEndpoint", w.KVReplayEndpoint}} {
			if e.v != "" {
				if err := fleet.CheckDialEndpoint(e.v); err != nil {
					c.err(o, p+"."+e.field, "%v", err)
				}
			}
		}
	}
}

func (c *checker) validatePool(o *Object, s *v1alpha1.InferencePoolSpec) {
	// Accepted means enforced: the router does not read these per pool
	// yet, so a value here would be silently ignored. Each error says
	// what does the job today.
	if s.ScrapeInterval != nil {
		c.err(o, "spec.scrapeInterval", "a per-pool scrape interval is not implemented yet: set the router's --scrape-interval")
	}
	if s.Predictor != nil {
		c.err(o, "spec.predictor", "per-pool predictor priors are not implemented yet: set the router's --prefill-rate-prior and --queue-cost-prior (the router learns each worker's rates from its TTFTs)")
	}
	if s.Saturation != nil {
		c.err(o, "spec.saturation", "pool saturation thresholds are not implemented yet: write them as a policy's exclude predicates (queuedPrompts, kvCacheUsage), as deploy/examples/policies/burst-policy.yaml does")
	}
}

func (c *checker) validateProvider(o *Object, s *v1alpha1.InferenceProviderSpec) {
	types := builtin.ProviderTypes()
	if t := string(s.Type); slices.Contains(crdProviderTypes, t) && !slices.Contains(types, t) {
		// Accepted would mean served in another API's shape: an Anthropic
		// provider would get an OpenAI body with a bearer key.
		c.err(o, "spec.type", "provider type %q has no adapter yet (want one of %s)", t, strings.Join(types, ", "))
	} else {
		c.enum(o, "spec.type", t, types, "provider type", true)
	}
	if err := checkBaseURL(s.BaseURL); err != nil {
		c.err(o, "spec.baseURL", "%v", err)
	}
	c.validateProviderSettings(o, s)
	if cr := s.Credentials; cr != nil {
		n := 0
		if cr.SecretRef != nil {
			n++
			if cr.SecretRef.Name == "" {
				c.err(o, "spec.credentials.secretRef.name", "secret name is required")
			}
		}
		if cr.Env != "" {
			n++
		}
		if cr.File != "" {
			n++
		}
		if n != 1 {
			c.err(o, "spec.credentials", "set exactly one of secretRef, env and file")
		}
	}
	if len(s.Models) == 0 {
		c.err(o, "spec.models", "a provider must serve at least one model")
	}
	seen := map[string]bool{}
	for i, m := range s.Models {
		p := idx("spec.models", i)
		if strings.TrimSpace(m.Name) == "" {
			c.err(o, p+".name", "model name is required")
			continue
		}
		if seen[m.Name] {
			c.err(o, p+".name", "model %q listed twice", m.Name)
		}
		seen[m.Name] = true
	}
	if pr := s.Pricing; pr != nil && (pr.InputPerMillionTokens < 0 || pr.OutputPerMillionTokens < 0) {
		c.err(o, "spec.pricing", "prices must not be negative")
	}
	c.validateProviderLimits(o, s)
}

// Bounds of a provider's spec.maxConcurrency and spec.circuitBreaker, as
// the CRD's markers.
const (
	maxProviderConcurrency = 1_000_000
	maxBreakerFailures     = 1000
	minBreakerOpenFor      = time.Second
	maxBreakerOpenFor      = time.Hour
)

// validateProviderLimits checks the concurrency cap and the breaker's
// thresholds: a value out of range is refused, not clamped, so what is
// accepted is what the routers enforce.
func (c *checker) validateProviderLimits(o *Object, s *v1alpha1.InferenceProviderSpec) {
	if m := s.MaxConcurrency; m != nil && (*m < 1 || *m > maxProviderConcurrency) {
		c.err(o, "spec.maxConcurrency", "%d: want 1 to %d requests in flight (omit it for no cap)", *m, maxProviderConcurrency)
	}
	cb := s.CircuitBreaker
	if cb == nil {
		return
	}
	if f := cb.Failures; f != nil && (*f < 1 || *f > maxBreakerFailures) {
		c.err(o, "spec.circuitBreaker.failures", "%d: want 1 to %d failed attempts in a row (omit it for the router's --breaker-failures)", *f, maxBreakerFailures)
	}
	if d := cb.OpenFor; d != nil && (d.Duration < minBreakerOpenFor || d.Duration > maxBreakerOpenFor) {
		c.err(o, "spec.circuitBreaker.openFor", "%s: want %s to %s (omit it for the router's --breaker-open-for)", d.Duration, minBreakerOpenFor, maxBreakerOpenFor)
	}
}

// validateProviderSettings checks the per-type settings: each type's
// member is required when its type needs one and refused on every other
// type, and the credentials a type cannot use are refused.
func (c *checker) validateProviderSettings(o *Object, s *v1alpha1.InferenceProviderSpec) {
	bedrock := s.Type == v1alpha1.ProviderBedrock
	switch b := s.Bedrock; {
	case b != nil && !bedrock:
		c.err(o, "spec.bedrock", "only for type Bedrock")
	case b == nil && bedrock:
		c.err(o, "spec.bedrock", "required by type Bedrock: set spec.bedrock.region")
	case b != nil && b.Region == "":
		c.err(o, "spec.bedrock.region", "required: the AWS region requests are signed for, e.g. us-east-1")
	case b != nil && (len(b.Region) > 32 || !awsRegion.MatchString(b.Region)):
		c.err(o, "spec.bedrock.region", "%q is not an AWS region (want e.g. us-east-1)", b.Region)
	}
	if cr := s.Credentials; bedrock && cr != nil {
		if cr.Env != "" {
			c.err(o, "spec.credentials.env", "not for type Bedrock: an AWS key pair is two values; omit credentials to use the AWS default chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the gateway's environment, a web identity token, the shared config), or name a Secret or directory holding accessKeyId and secretAccessKey")
		}
		if r := cr.SecretRef; r != nil && r.Key != "" && r.Key != "apiKey" {
			c.err(o, "spec.credentials.secretRef.key", "not for type Bedrock: the Secret's keys are accessKeyId, secretAccessKey and optionally sessionToken")
		}
	}
	c.validateAzure(o, s)
	c.validateDatabricks(o, s)
}

// validateAzure checks an AzureOpenAI provider's spec.azure and
// credentials: the resource's API key (spec.credentials) or a Microsoft
// Entra ID application (spec.azure.entra), exactly one.
func (c *checker) validateAzure(o *Object, s *v1alpha1.InferenceProviderSpec) {
	azure := s.Type == v1alpha1.ProviderAzureOpenAI
	switch a := s.Azure; {
	case a != nil && !azure:
		c.err(o, "spec.azure", "only for type AzureOpenAI")
	case a == nil && azure:
		c.err(o, "spec.azure", "required by type AzureOpenAI: set spec.azure.apiVersion, e.g. 2024-10-21")
	case a != nil && a.APIVersion == "":
		c.err(o, "spec.azure.apiVersion", "required: the api-version of every request, e.g. 2024-10-21")
	case a != nil && (len(a.APIVersion) > 32 || !azureAPIVersion.MatchString(a.APIVersion)):
		c.err(o, "spec.azure.apiVersion", "%q is not an Azure OpenAI api-version (want e.g. 2024-10-21 or 2025-01-01-preview)", a.APIVersion)
	}
	if !azure {
		return
	}
	var entra *v1alpha1.AzureEntraAuth
	if s.Azure != nil {
		entra = s.Azure.Entra
	}
	switch {
	case s.Credentials == nil && entra == nil:
		c.err(o, "spec.credentials", "required by type AzureOpenAI: the resource's API key (sent as api-key), or set spec.azure.entra for a Microsoft Entra ID application")
	case s.Credentials != nil && entra != nil:
		c.err(o, "spec.credentials", "not with spec.azure.entra: an AzureOpenAI provider authenticates with the resource's API key (spec.credentials) or as a Microsoft Entra ID application (spec.azure.entra), not both")
	}
	if entra != nil {
		c.validateEntra(o, entra)
	}
	if u, err := url.Parse(s.BaseURL); err == nil {
		p := strings.TrimRight(u.Path, "/")
		if strings.HasSuffix(p, "/openai") || strings.Contains(p, "/openai/") || u.RawQuery != "" {
			c.err(o, "spec.baseURL", "for type AzureOpenAI the resource's endpoint only, e.g. https://<resource>.openai.azure.com: the gateway appends /openai/deployments/<servedName>/... and ?api-version=")
		}
	}
}

// validateEntra checks spec.azure.entra as the CRD's markers do, for
// providers read from files, which no API server checked.
func (c *checker) validateEntra(o *Object, e *v1alpha1.AzureEntraAuth) {
	switch {
	case e.TenantID == "":
		c.err(o, "spec.azure.entra.tenantID", "required: the directory (tenant) id, a GUID, or its domain name")
	case len(e.TenantID) > 253 || !entraTenant.MatchString(e.TenantID):
		c.err(o, "spec.azure.entra.tenantID", "%q is not a tenant id (a GUID) or domain name (contoso.onmicrosoft.com)", e.TenantID)
	}
	if strings.TrimSpace(e.ClientID) == "" {
		c.err(o, "spec.azure.entra.clientID", "required: the application (client) id")
	} else if len(e.ClientID) > 256 {
		c.err(o, "spec.azure.entra.clientID", "longer than 256 characters")
	}
	if e.ClientSecretRef.Name == "" {
		c.err(o, "spec.azure.entra.clientSecretRef.name", "required: the Secret holding the application's client secret")
	}
	if h := e.AuthorityHost; h != "" && (len(h) > 256 || !entraAuthority.MatchString(h)) {
		c.err(o, "spec.azure.entra.authorityHost", "%q is not an authority host: scheme and host only, e.g. https://login.microsoftonline.com", h)
	}
}

// validateDatabricks checks a Databricks provider's spec.databricks and
// credentials: a personal access token, or OAuth machine-to-machine.
func (c *checker) validateDatabricks(o *Object, s *v1alpha1.InferenceProviderSpec) {
	d := s.Databricks
	if d != nil && s.Type != v1alpha1.ProviderDatabricks {
		c.err(o, "spec.databricks", "only for type Databricks")
		return
	}
	if s.Type == v1alpha1.ProviderDatabricks {
		if u, err := url.Parse(s.BaseURL); err == nil && (strings.TrimRight(u.Path, "/") != "/serving-endpoints" || u.RawQuery != "") {
			c.err(o, "spec.baseURL", "for type Databricks the workspace's serving endpoints, https://<workspace>/serving-endpoints (the OpenAI clients' base URL; the gateway appends /chat/completions)")
		}
	}
	if s.Type == v1alpha1.ProviderDatabricks && s.Credentials == nil && (d == nil || d.OAuth == nil) {
		c.err(o, "spec.credentials", "required by type Databricks: a personal access token, or set spec.databricks.oauth for a service principal")
	}
	if d == nil || d.OAuth == nil {
		return
	}
	if s.Credentials != nil {
		c.err(o, "spec.credentials", "not with spec.databricks.oauth: a Databricks provider authenticates with a personal access token (spec.credentials) or as a service principal (spec.databricks.oauth), not both")
	}
	if strings.TrimSpace(d.OAuth.ClientID) == "" {
		c.err(o, "spec.databricks.oauth.clientID", "required: the service principal's client id")
	} else if len(d.OAuth.ClientID) > 256 {
		c.err(o, "spec.databricks.oauth.clientID", "longer than 256 characters")
	}
	if d.OAuth.ClientSecretRef.Name == "" {
		c.err(o, "spec.databricks.oauth.clientSecretRef.name", "required: the Secret holding the OAuth secret")
	}
}

func checkBaseURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("url is required")
	}
	if _, err := fleet.CheckURL(raw); err != nil {
		if errors.Is(err, fleet.ErrURLCredentials) {
			return fmt.Errorf("url %w (use credentials)", err)
		}
		return fmt.Errorf("url %w", err)
	}
	return nil
}

// enum checks an enumerated value; empty is allowed unless required.
func (c *checker) enum(o *Object, path, v string, allowed []string, what string, required bool) bool {
	if v == "" {
		if required {
			c.err(o, path, "%s is required%s", what, didYouMean("", allowed))
			return false
		}
		return true
	}
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	c.err(o, path, "unknown %s %q%s", what, v, didYouMean(v, allowed))
	return false
}

func (c *checker) validateMatch(o *Object, path string, m *v1alpha1.Match) {
	if m.Model == "" && m.Tenant == "" && m.Tag == "" {
		c.err(o, path, "empty match: set model, tenant or tag (omit matches to match every request)")
	}
	if m.Tag != "" && !tagRE.MatchString(m.Tag) {
		c.err(o, path+".tag", "%q is not a valid tag (1-64 of letters, digits and . _ : / -)", m.Tag)
	}
}

func (c *checker) validatePolicy(o *Object, s *v1alpha1.InferencePolicySpec) {
	if len(s.Rules) == 0 {
		c.err(o, "spec.rules", "a policy needs at least one rule")
	}
	names := map[string]int{}
	for i := range s.Rules {
		r := &s.Rules[i]
		p := idx("spec.rules", i)
		switch {
		case r.Name == "":
			c.err(o, p+".name", "rule name is required")
		case !tagRE.MatchString(r.Name):
			c.err(o, p+".name", "%q is not a valid rule name (1-64 of letters, digits and . _ : / -)", r.Name)
		default:
			if j, dup := names[r.Name]; dup {
				c.err(o, p+".name", "rule name %q already used by spec.rules[%d]", r.Name, j)
			}
			names[r.Name] = i
		}
		for j := range r.Matches {
			c.validateMatch(o, idx(p+".matches", j), &r.Matches[j])
		}
		c.validateRoute(o, p+".route", &r.Route)
	}
}

func (c *checker) validateRoute(o *Object, p string, rt *v1alpha1.Route) {
	for i, ce := range rt.Consider {
		cp := idx(p+".consider", i)
		if ce.Models == nil {
			c.err(o, cp, "empty consider entry: set models")
			continue
		}
		if len(ce.Models.Names) == 0 {
			c.err(o, cp+".models.names", "list at least one model")
		}
		seen := map[string]bool{}
		for j, n := range ce.Models.Names {
			if strings.TrimSpace(n) == "" {
				c.err(o, idx(cp+".models.names", j), "empty model name")
			} else if seen[n] {
				c.err(o, idx(cp+".models.names", j), "model %q listed twice", n)
			}
			seen[n] = true
		}
	}
	filters := map[string]bool{}
	for i := range rt.Exclude {
		f := &rt.Exclude[i]
		fp := idx(p+".exclude", i)
		switch {
		case f.Name == "":
			c.err(o, fp+".name", "filter name is required")
		case !tagRE.MatchString(f.Name):
			c.err(o, fp+".name", "%q is not a valid filter name (1-64 of letters, digits and . _ : / -)", f.Name)
		case filters[f.Name]:
			c.err(o, fp+".name", "filter name %q used twice in this rule", f.Name)
		}
		filters[f.Name] = true
		if f.If != nil {
			c.validateMatch(o, fp+".if", f.If)
		}
		c.validateSelector(o, fp+".drop", &f.Drop)
	}
	for i := range rt.Select {
		t := &rt.Select[i]
		tp := idx(p+".select", i)
		c.enum(o, tp+".type", string(t.Type), backendTypes, "backend type", false)
		if t.Minimize != "" {
			if _, ok := parseObjective(string(t.Minimize)); !ok {
				c.err(o, tp+".minimize", "unknown objective %q%s", t.Minimize, didYouMean(string(t.Minimize), objectiveNames))
			}
		}
		if t.Minimize != "" && len(t.Order) > 0 {
			c.err(o, tp, "set minimize or order, not both")
		}
		seen := map[string]bool{}
		for j, n := range t.Order {
			if strings.TrimSpace(n) == "" {
				c.err(o, idx(tp+".order", j), "empty name")
			} else if seen[n] {
				c.err(o, idx(tp+".order", j), "%q listed twice", n)
			}
			seen[n] = true
		}
	}
	c.enum(o, p+".onEmpty", string(rt.OnEmpty), onEmptyNames, "onEmpty action", false)
}

func (c *checker) validateSelector(o *Object, p string, s *v1alpha1.BackendSelector) {
	if *s == (v1alpha1.BackendSelector{}) {
		c.err(o, p, "empty selector would drop every backend: set backend or a state such as queuedPrompts")
		return
	}
	if b := s.Backend; b != nil {
		if b.Type == "" && len(b.Names) == 0 && len(b.Models) == 0 && b.Pool == "" {
			c.err(o, p+".backend", "empty backend selector: set type, names, models or pool")
		}
		c.enum(o, p+".backend.type", string(b.Type), backendTypes, "backend type", false)
	}
	for _, r := range []struct {
		field string
		r     *v1alpha1.NumberRange
		unit  bool
	}{
		{"queuedPrompts", s.QueuedPrompts, false},
		{"runningRequests", s.RunningRequests, false},
		{"inFlight", s.InFlight, false},
		{"kvCacheUsage", s.KVCacheUsage, true},
		{"predictedTTFT", s.PredictedTTFT, false},
		{"cachedTokens", s.CachedTokens, false},
	} {
		if r.r != nil {
			c.validateRange(o, p+"."+r.field, r.r, r.unit)
		}
	}
}

// validateRange rejects empty ranges and ones no value can satisfy.
func (c *checker) validateRange(o *Object, p string, r *v1alpha1.NumberRange, unit bool) {
	if r.GreaterThan == nil && r.GreaterThanOrEqual == nil && r.LessThan == nil && r.LessThanOrEqual == nil {
		c.err(o, p, "set greaterThan, greaterThanOrEqual, lessThan or lessThanOrEqual")
		return
	}
	lo, loIncl, hasLo := bound(r.GreaterThan, r.GreaterThanOrEqual, true)
	hi, hiIncl, hasHi := bound(r.LessThan, r.LessThanOrEqual, false)
	if hasLo && hasHi && (lo > hi || (lo == hi && !(loIncl && hiIncl))) {
		c.err(o, p, "no value satisfies this range: it can never match")
	}
	if unit {
		for _, v := range []*float64{r.GreaterThan, r.GreaterThanOrEqual, r.LessThan, r.LessThanOrEqual} {
			if v != nil && (*v < 0 || *v > 1) {
				c.err(o, p, "%g: KV cache usage is a fraction in 0..1 (write 0.7, not 70)", *v)
				break
			}
		}
	}
}

// bound merges a strict and an inclusive bound into the tighter one.
func bound(strict, incl *float64, lower bool) (v float64, inclusive, ok bool) {
	switch {
	case strict == nil && incl == nil:
		return 0, false, false
	case strict == nil:
		return *incl, true, true
	case incl == nil:
		return *strict, false, true
	}
	if lower {
		if *incl > *strict {
			return *incl, true, true
		}
		return *strict, false, true
	}
	if *incl < *strict {
		return *incl, true, true
	}
	return *strict, false, true
}

// validateTenantFlow checks a tenant's share and classes in the gateway's
// flow control.
func (c *checker) validateTenantFlow(o *Object, p string, t *v1alpha1.Tenant) {
	if t.Weight < 0 || t.Weight > 1000 {
		c.err(o, p+".weight", "%d: want 1 to 1000 (0 or unset: 1)", t.Weight)
	}
	for _, f := range []struct {
		name string
		v    v1alpha1.Priority
	}{{"priority", t.Priority}, {"maxPriority", t.MaxPriority}} {
		if f.v.Rank() < 0 {
			c.err(o, p+"."+f.name, "%q: want Critical, Standard or Sheddable", f.v)
		}
	}
	if t.MaxPriority != "" && t.Priority.Rank() > t.MaxPriority.Rank() && t.MaxPriority.Rank() >= 0 {
		c.err(o, p+".maxPriority", "%s is below the tenant's priority %s: a tenant may always ask for its own class", t.MaxPriority, cmp.Or(t.Priority, v1alpha1.PriorityStandard))
	}
}

// validateTenants checks spec.tenants and their keys: with APIKey at least
// one tenant has a key, unless JWTs are accepted too; with JWT there is a
// tenant for tokens to name and no key (it would not be checked); with
// None no tenant is listed (nobody would be checked); a digest belongs to
// one tenant only (the key names its tenant).
func (c *checker) validateTenants(o *Object, s *v1alpha1.GatewayBackendSpec) {
	mode := authMode(s)
	apiKey, jwtMode := mode == v1alpha1.AuthAPIKey, mode == v1alpha1.AuthJWT
	// jwtOn: bearer JWTs name tenants, so a tenant needs no key.
	jwtOn := jwtMode || apiKey && s.Auth.JWT != nil
	names := map[string]bool{}
	owner := map[string]string{} // digest → tenant
	keys := 0
	addDigest := func(path, tenant, d string) {
		switch {
		case strings.HasPrefix(d, "sy-"):
			// Never echo it: diagnostics reach logs and status conditions.
			c.err(o, path, "this is an API key, not its digest (not shown): list the sha256: digest yardctl keys create prints, and treat this key as leaked (revoke it)")
			return
		case !digestRE.MatchString(d):
			c.err(o, path, "not a key digest: want sha256: and 64 lowercase hex digits, as yardctl keys create prints")
			return
		}
		if prev, ok := owner[d]; ok {
			c.err(o, path, "digest %s… is also a key of tenant %q: a key names one tenant", d[:15], prev)
			return
		}
		owner[d] = tenant
		keys++
	}
	for i, t := range s.Tenants {
		p := idx("spec.tenants", i)
		switch {
		case t.Name == "":
			c.err(o, p+".name", "tenant name is required")
		case len(t.Name) > 63 || !tenantRE.MatchString(t.Name):
			c.err(o, p+".name", "%q is not a valid tenant name (1-63 lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit)", t.Name)
		case names[t.Name]:
			c.err(o, p+".name", "tenant %q listed twice", t.Name)
		}
		names[t.Name] = true
		if t.KeysSecret == "" && len(t.KeyDigests) == 0 && !jwtOn {
			// A warning: removing a tenant's last key must take effect.
			c.warn(o, p, "no keysSecret and no keyDigests: tenant %q has no key and cannot call", t.Name)
		}
		if jwtMode {
			// Accepted means enforced: mode JWT refuses every API key.
			if len(t.KeyDigests) > 0 {
				c.err(o, p+".keyDigests", "API keys are refused with auth mode JWT: set spec.auth.mode: APIKey to accept keys and JWTs, or remove the keys")
			}
			if t.KeysSecret != "" {
				c.err(o, p+".keysSecret", "API keys are refused with auth mode JWT: set spec.auth.mode: APIKey to accept keys and JWTs, or remove keysSecret")
			}
		}
		for j, d := range t.KeyDigests {
			addDigest(idx(p+".keyDigests", j), t.Name, d)
		}
		c.validateLimits(o, p+".limits", t.Limits)
		c.validateTenantFlow(o, p, &t)
		for j, tag := range t.AllowedTags {
			switch {
			case !tagRE.MatchString(tag):
				c.err(o, idx(p+".allowedTags", j), "%q is not a valid tag (1-64 of letters, digits and . _ : / -)", tag)
			case s.Tags == nil || s.Tags.Header == "":
				c.warn(o, idx(p+".allowedTags", j), "no spec.tags.header: clients set no tags, so the tenant's allowedTags change nothing")
			case len(s.Tags.Allowed) > 0 && !slices.Contains(s.Tags.Allowed, tag):
				c.warn(o, idx(p+".allowedTags", j), "tag %q is not in spec.tags.allowed: no client may set it", tag)
			}
		}
		if t.KeysSecret == "" || jwtMode {
			continue
		}
		if !nameRE.MatchString(t.KeysSecret) || len(t.KeysSecret) > 253 {
			c.err(o, p+".keysSecret", "%q is not a valid Secret name", t.KeysSecret)
			continue
		}
		sec, ok := o.KeySecrets[t.KeysSecret]
		switch {
		case !ok:
			c.err(o, p+".keysSecret", "Secret %q was not read: only the kubernetes source reads Secrets; with files, list keyDigests", t.KeysSecret)
		case sec.Offline:
			keys++ // not read here; the cluster's policyd reads it
		case sec.Missing:
			c.warn(o, p+".keysSecret", "Secret %s/%s not found: tenant %q has no key from it (yardctl keys create)", o.Namespace, t.KeysSecret, t.Name)
		case sec.Err != "":
			c.err(o, p+".keysSecret", "Secret %s/%s: %s", o.Namespace, t.KeysSecret, sec.Err)
		default:
			for _, k := range slices.Sorted(maps.Keys(sec.Digests)) {
				addDigest(p+".keysSecret", t.Name, sec.Digests[k])
			}
		}
	}
	switch {
	case apiKey && len(s.Tenants) == 0 && jwtOn:
		c.err(o, "spec.tenants", "auth mode APIKey needs at least one tenant, for a key or a token's %s claim to name (yardctl keys create --tenant NAME)", jwtTenantClaim(s.Auth.JWT))
	case apiKey && len(s.Tenants) == 0:
		c.err(o, "spec.tenants", "auth mode APIKey needs at least one tenant with a key (yardctl keys create --tenant NAME)")
	case jwtMode && len(s.Tenants) == 0:
		c.err(o, "spec.tenants", "auth mode JWT needs at least one tenant: a token's tenant claim must name one of spec.tenants (an identity provider cannot create tenants)")
	case apiKey && keys == 0 && !jwtOn && !c.failedAt(o, "spec.tenants"):
		// A warning, not an error: revoking the last key must take effect
		// (an error would keep the last snapshot, and the key, serving).
		c.warn(o, "spec.tenants", "no tenant has a key: every request is refused 401")
	case !apiKey && !jwtMode && len(s.Tenants) > 0:
		c.err(o, "spec.tenants", "tenants are only checked with auth mode APIKey or JWT: set spec.auth.mode, or remove spec.tenants")
	}
	if (apiKey || jwtMode) && s.Tags != nil {
		for i, tt := range s.Tags.Tenants {
			if tt.Tenant != "" && !names[tt.Tenant] {
				c.warn(o, idx("spec.tags.tenants", i)+".tenant", "tenant %q is not in spec.tenants: a request's tenant is always one of them, so its default tags never apply", tt.Tenant)
			}
		}
	}
}

// authMode is spec.auth.mode, None when unset.
func authMode(s *v1alpha1.GatewayBackendSpec) v1alpha1.AuthMode {
	if s.Auth == nil || s.Auth.Mode == "" {
		return v1alpha1.AuthNone
	}
	return s.Auth.Mode
}

func jwtTenantClaim(j *v1alpha1.JWTAuth) string {
	if j.TenantClaim == "" {
		return DefaultJWTTenantClaim
	}
	return j.TenantClaim
}

// ValidTenant reports whether name is a valid tenant name (spec.tenants'
// rule: safe as a metric label and in usage events).
func ValidTenant(name string) bool { return len(name) <= 63 && tenantRE.MatchString(name) }

// Bounds of spec.auth.jwt, the CRD's.
const (
	maxJWTAudiences = 16
	maxJWTString    = 1024 // issuer, an audience
	maxJWTClaim     = 256
	maxJWKSURL      = 2048
	maxJWTClockSkew = 10 * time.Minute
	minJWKSRefresh  = 10 * time.Second
	maxJWKSRefresh  = 24 * time.Hour
)

// validateAuth checks spec.auth: the mode, and the identity provider it
// needs (mode JWT) or allows (APIKey) and None refuses.
func (c *checker) validateAuth(o *Object, s *v1alpha1.GatewayBackendSpec) {
	if s.Auth == nil {
		return
	}
	c.enum(o, "spec.auth.mode", string(s.Auth.Mode), authModes, "auth mode", false)
	j := s.Auth.JWT
	switch mode := authMode(s); {
	case mode == v1alpha1.AuthJWT && j == nil:
		c.err(o, "spec.auth.jwt", "required by auth mode JWT: name the identity provider (issuer, audiences, jwksURL)")
	case mode == v1alpha1.AuthNone && j != nil:
		c.err(o, "spec.auth.jwt", "set with auth mode None, where no credentials are checked: set spec.auth.mode: JWT (bearer JWTs only) or APIKey (keys and JWTs)")
	}
	if j == nil {
		return
	}
	const p = "spec.auth.jwt"
	switch {
	case j.Issuer == "":
		c.err(o, p+".issuer", "required: the iss the identity provider's tokens carry")
	case len(j.Issuer) > maxJWTString || strings.IndexFunc(j.Issuer, unicode.IsSpace) >= 0:
		c.err(o, p+".issuer", "want 1 to %d bytes without spaces", maxJWTString)
	}
	if len(j.Audiences) == 0 {
		c.err(o, p+".audiences", "required: list at least one audience a token's aud must contain")
	} else if len(j.Audiences) > maxJWTAudiences {
		c.err(o, p+".audiences", "%d audiences, want at most %d", len(j.Audiences), maxJWTAudiences)
	}
	seen := map[string]bool{}
	for i, a := range j.Audiences {
		switch {
		case a == "" || len(a) > maxJWTString:
			c.err(o, idx(p+".audiences", i), "want an audience of 1 to %d bytes", maxJWTString)
		case seen[a]:
			c.err(o, idx(p+".audiences", i), "audience %q listed twice", a)
		}
		seen[a] = true
	}
	if len(j.TenantClaim) > maxJWTClaim {
		c.err(o, p+".tenantClaim", "want a claim name of at most %d bytes", maxJWTClaim)
	}
	if err := checkJWKSURL(j.JWKSURL); err != nil {
		c.err(o, p+".jwksURL", "%v", err)
	}
	if d := j.ClockSkew; d != nil && (d.Duration < 0 || d.Duration > maxJWTClockSkew) {
		c.err(o, p+".clockSkew", "%s: want 0 to %s", d.Duration, maxJWTClockSkew)
	}
	if d := j.RefreshInterval; d != nil && (d.Duration < minJWKSRefresh || d.Duration > maxJWKSRefresh) {
		c.err(o, p+".refreshInterval", "%s: want %s to %s", d.Duration, minJWKSRefresh, maxJWKSRefresh)
	}
}

// checkJWKSURL accepts an https URL, or an http one to a loopback
// address (a sidecar serving a JWKS file): the keys that say who a caller
// is must not cross a network in the clear. No credentials (a URL lands
// in logs and status conditions) and no fragment.
func checkJWKSURL(raw string) error {
	if raw == "" {
		return errors.New("required: the identity provider's JWKS URL (its OIDC discovery's jwks_uri)")
	}
	if len(raw) > maxJWKSURL {
		return fmt.Errorf("URL of %d bytes, want at most %d", len(raw), maxJWKSURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.User != nil:
		return errors.New("credentials in the URL are refused: they would show in logs and status")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("a JWKS URL has no fragment")
	case u.Scheme == "https" && u.Host != "":
		return nil
	case u.Scheme == "http" && loopbackHosts[u.Hostname()] && !strings.Contains(u.Host, "@"):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("http is accepted only to a loopback address (127.0.0.1, localhost, [::1]): use https for %s", u.Host)
	}
	return errors.New("want an https URL")
}

// loopbackHosts are the hosts a JWKS URL may use plain http to (the CRD's
// pattern names the same).
var loopbackHosts = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true}

// failedAt reports whether an error was already reported under path.
func (c *checker) failedAt(o *Object, path string) bool {
	return slices.ContainsFunc(c.diags, func(d Diagnostic) bool {
		return d.Severity == SeverityError && d.Kind == o.Kind && d.Namespace == o.Namespace && d.Name == o.Name && strings.HasPrefix(d.Path, path)
	})
}

func (c *checker) validateBackend(o *Object, s *v1alpha1.GatewayBackendSpec) {
	c.validateClassifiers(o, s.Classifiers)
	c.validatePII(o, s.PII)
	seen := map[string]bool{}
	for i, m := range s.Models {
		p := idx("spec.models", i)
		if strings.TrimSpace(m.Name) == "" {
			c.err(o, p+".name", "model name is required")
		} else if seen[m.Name] {
			c.err(o, p+".name", "model %q listed twice", m.Name)
		}
		seen[m.Name] = true
	}
	seen = map[string]bool{}
	for i, r := range s.Policies {
		p := idx("spec.policies", i)
		if r.Name == "" {
			c.err(o, p+".name", "policy name is required")
		} else if seen[r.Name] {
			c.err(o, p+".name", "policy %q listed twice", r.Name)
		}
		seen[r.Name] = true
		c.enum(o, p+".mode", string(r.Mode), modeNames, "policy mode", false)
	}
	c.validateAuth(o, s)
	c.validateTenants(o, s)
	if t := s.Tags; t != nil {
		if t.Header != "" && !headerRE.MatchString(t.Header) {
			c.err(o, "spec.tags.header", "%q is not a valid HTTP header name", t.Header)
		}
		for i, tag := range t.Allowed {
			if !tagRE.MatchString(tag) {
				c.err(o, idx("spec.tags.allowed", i), "%q is not a valid tag (1-64 of letters, digits and . _ : / -)", tag)
			}
		}
		tenants := map[string]bool{}
		for i, tt := range t.Tenants {
			p := idx("spec.tags.tenants", i)
			if tt.Tenant == "" {
				c.err(o, p+".tenant", "tenant is required")
			} else if tenants[tt.Tenant] {
				c.err(o, p+".tenant", "tenant %q listed twice", tt.Tenant)
			}
			tenants[tt.Tenant] = true
			if len(tt.Tags) == 0 {
				c.err(o, p+".tags", "list at least one tag")
			}
			for j, tag := range tt.Tags {
				if !tagRE.MatchString(tag) {
					c.err(o, idx(p+".tags", j), "%q is not a valid tag (1-64 of letters, digits and . _ : / -)", tag)
				}
			}
		}
	}
}

// validateLimits checks a tenant's limits: in range, budgets no smaller
// than a minute's tokens, a model listed once.
func (c *checker) validateLimits(o *Object, p string, l *v1alpha1.TenantLimits) {
	if l == nil {
		return
	}
	limitErrs := func(err error) {
		if err == nil {
			return
		}
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			path, msg, _ := strings.Cut(e.Error(), ": ")
			c.err(o, path, "%s", msg)
		}
	}
	limitErrs(rateLimits(l.RateLimits).Validate(p))
	seen := map[string]bool{}
	for j, m := range l.Models {
		mp := idx(p+".models", j)
		switch {
		case m.Model == "" || len(m.Model) > 256:
			c.err(o, mp+".model", "want a model name of 1 to 256 bytes")
		case seen[m.Model]:
			c.err(o, mp+".model", "model %q listed twice", m.Model)
		}
		seen[m.Model] = true
		limitErrs(rateLimits(m.RateLimits).Validate(mp))
	}
}
