package policy

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/tenantlimit"
)

// Snapshot is a compiled, immutable set of resources: the catalog
// (worker sets, pools, providers) and the routing programs. It is safe for
// concurrent use.
type Snapshot struct {
	WorkerSets []WorkerSet
	Pools      []Pool
	Providers  []Provider
	Policies   []*Policy
	// Programs has one entry per GatewayBackend, by name; when there is
	// none, one implicit program with an empty name.
	Programs []*Program
	// Warnings found while compiling.
	Warnings Diagnostics

	providers map[string]*Provider
	sets      map[string]*WorkerSet
	programs  map[string]*Program
}

// Compile checks objs (each alone, then across resources) and, when there
// is no error, compiles them. The diagnostics hold every error and
// warning, sorted; the snapshot is nil when any is an error.
func Compile(objs []*Object) (*Snapshot, Diagnostics) {
	c := &checker{}
	for _, o := range objs {
		c.diags = append(c.diags, o.decodeDiags...)
		if !o.broken {
			c.validateObject(o)
			continue
		}
		// Still check what did decode, so one run lists every error;
		// drop what a decode error already explains (a field that failed
		// to decode is zero, and would read as missing).
		sub := &checker{}
		sub.validateObject(o)
		for _, d := range sub.diags {
			if !explained(o.decodeDiags, d.Path) {
				c.diags = append(c.diags, d)
			}
		}
	}
	cat := c.index(objs)
	c.crossCheck(cat)
	c.diags.Sort()
	if c.diags.HasErrors() {
		return nil, c.diags
	}
	s := compile(cat)
	s.Warnings = c.diags
	if err := s.build(); err != nil {
		// build only fails on what the checks above reject.
		return nil, append(c.diags, Diagnostic{Message: "internal: " + err.Error()})
	}
	return s, c.diags
}

// explained reports whether a decode error is at path, or inside it, or
// at one of its parents.
func explained(decode Diagnostics, path string) bool {
	for _, d := range decode {
		if d.Path == path || strings.HasPrefix(d.Path, path+".") || strings.HasPrefix(d.Path, path+"[") ||
			strings.HasPrefix(path, d.Path+".") || strings.HasPrefix(path, d.Path+"[") {
			return true
		}
	}
	return false
}

// Load parses and compiles the YAML files and directories named.
func Load(paths ...string) (*Snapshot, Diagnostics, error) {
	objs, diags, err := LoadPaths(paths...)
	if err != nil {
		return nil, nil, err
	}
	s, d := Compile(objs)
	diags = append(diags, d...)
	diags.Sort()
	if diags.HasErrors() {
		return nil, diags, nil
	}
	return s, diags, nil
}

func compile(cat *catalog) *Snapshot {
	s := &Snapshot{}
	for _, o := range sortedObjects(cat.workerSets) {
		w := &o.WorkerSet.Spec
		ws := WorkerSet{
			Namespace: o.Namespace, Name: o.Name, Model: w.Model, Pool: w.Pool, Service: w.Service,
			Port: cmp.Or(w.Port, 8000), MetricsPath: cmp.Or(w.MetricsPath, "/metrics"), BlockSize: cmp.Or(w.BlockSize, 16),
		}
		if k := w.KVEvents; k != nil {
			ws.KVEventsPort, ws.KVReplayPort, ws.KVTopic = k.Port, k.ReplayPort, k.Topic
		}
		for _, st := range w.Static {
			ws.Static = append(ws.Static, StaticWorker{ID: st.ID, URL: strings.TrimRight(st.URL, "/"), KVEventsEndpoint: st.KVEventsEndpoint, KVReplayEndpoint: st.KVReplayEndpoint})
		}
		s.WorkerSets = append(s.WorkerSets, ws)
	}
	for _, o := range sortedObjects(cat.pools) {
		p := &o.Pool.Spec
		pool := Pool{Namespace: o.Namespace, Name: o.Name}
		if p.ScrapeInterval != nil {
			pool.ScrapeInterval = p.ScrapeInterval.Duration
		}
		if pr := p.Predictor; pr != nil {
			pool.PrefillTokensPerSecond, pool.SecondsPerQueuedRequest = pr.PrefillTokensPerSecond, pr.SecondsPerQueuedRequest
		}
		if sat := p.Saturation; sat != nil {
			pool.MaxQueuedPrompts, pool.MaxKVCacheUsage = sat.MaxQueuedPrompts, sat.MaxKVCacheUsage
		}
		s.Pools = append(s.Pools, pool)
	}
	for _, o := range sortedObjects(cat.providers) {
		p := &o.Provider.Spec
		prov := Provider{Namespace: o.Namespace, Name: o.Name, Type: string(p.Type), BaseURL: strings.TrimRight(p.BaseURL, "/")}
		for _, m := range p.Models {
			prov.Models = append(prov.Models, ProviderModel{Name: m.Name, ServedName: cmp.Or(m.ServedName, m.Name)})
		}
		if cr := p.Credentials; cr != nil {
			if cr.SecretRef != nil {
				prov.Credentials.SecretName, prov.Credentials.SecretKey = cr.SecretRef.Name, cmp.Or(cr.SecretRef.Key, "apiKey")
			}
			prov.Credentials.Env, prov.Credentials.File = cr.Env, cr.File
		}
		if b := p.Bedrock; b != nil {
			prov.Settings.BedrockRegion = b.Region
		}
		if a := p.Azure; a != nil {
			prov.Settings.AzureAPIVersion = a.APIVersion
			if e := a.Entra; e != nil {
				prov.Settings.AzureEntra = &AzureEntra{TenantID: e.TenantID, ClientID: e.ClientID,
					AuthorityHost: strings.TrimRight(cmp.Or(e.AuthorityHost, DefaultEntraAuthorityHost), "/"),
					SecretName:    e.ClientSecretRef.Name, SecretKey: cmp.Or(e.ClientSecretRef.Key, "apiKey")}
			}
		}
		if d := p.Databricks; d != nil && d.OAuth != nil {
			prov.Settings.DatabricksOAuth = &DatabricksOAuth{ClientID: d.OAuth.ClientID,
				SecretName: d.OAuth.ClientSecretRef.Name, SecretKey: cmp.Or(d.OAuth.ClientSecretRef.Key, "apiKey")}
		}
		if pr := p.Pricing; pr != nil {
			prov.InputPrice, prov.OutputPrice, prov.Currency = pr.InputPerMillionTokens, pr.OutputPerMillionTokens, pr.Currency
		}
		if p.MaxConcurrency != nil {
			prov.MaxConcurrency = *p.MaxConcurrency
		}
		if cb := p.CircuitBreaker; cb != nil {
			if cb.Failures != nil {
				prov.Breaker.Failures = *cb.Failures
			}
			if cb.OpenFor != nil {
				prov.Breaker.OpenFor = cb.OpenFor.Duration
			}
		}
		s.Providers = append(s.Providers, prov)
	}
	for _, o := range sortedObjects(cat.policies) {
		s.Policies = append(s.Policies, compilePolicy(o))
	}
	for _, o := range sortedObjects(cat.backends) {
		b := &o.Backend.Spec
		prog := &Program{Namespace: o.Namespace, Name: o.Name, AuthMode: string(v1alpha1.AuthNone)}
		for _, m := range b.Models {
			prog.Models = append(prog.Models, m.Name)
		}
		for _, r := range b.Policies {
			mode := ModeRoute
			if r.Mode == v1alpha1.PolicyModeGuard {
				mode = ModeGuard
			}
			prog.Policies = append(prog.Policies, PolicyRef{Name: r.Name, Mode: mode})
		}
		if b.Auth != nil && b.Auth.Mode != "" {
			prog.AuthMode = string(b.Auth.Mode)
		}
		if b.Auth != nil && b.Auth.JWT != nil {
			prog.JWT = compileJWT(b.Auth.JWT)
		}
		prog.Classifiers = compileClassifiers(b.Classifiers)
		prog.PII = compilePII(b.PII)
		for _, t := range b.Tenants {
			at := AuthTenant{Name: t.Name, AllowedTags: slices.Clone(t.AllowedTags)}
			for _, d := range t.KeyDigests {
				at.Keys = appendDigest(at.Keys, d)
			}
			if sec, ok := o.KeySecrets[t.KeysSecret]; ok && t.KeysSecret != "" {
				for _, k := range slices.Sorted(maps.Keys(sec.Digests)) {
					at.Keys = appendDigest(at.Keys, sec.Digests[k])
				}
			}
			at.Limits = compileLimits(t.Limits)
			at.Flow = compileFlow(&t)
			prog.AuthTenants = append(prog.AuthTenants, at)
		}
		if t := b.Tags; t != nil {
			prog.TagsHeader, prog.AllowedTags = t.Header, slices.Clone(t.Allowed)
			for _, tt := range t.Tenants {
				prog.Tenants = append(prog.Tenants, TenantTags{Tenant: tt.Tenant, Tags: slices.Clone(tt.Tags)})
			}
		}
		s.Programs = append(s.Programs, prog)
	}
	return s
}

func compilePolicy(o *Object) *Policy {
	pol := &Policy{Namespace: o.Namespace, Name: o.Name}
	for _, r := range o.Policy.Spec.Rules {
		rule := &Rule{Policy: o.Name, Name: r.Name}
		for _, m := range r.Matches {
			rule.Matches = append(rule.Matches, Match(m))
		}
		for _, ce := range r.Route.Consider {
			if ce.Models != nil {
				for _, n := range ce.Models.Names {
					if !slices.Contains(rule.Consider, n) {
						rule.Consider = append(rule.Consider, n)
					}
				}
			}
		}
		for _, f := range r.Route.Exclude {
			rule.Filters = append(rule.Filters, compileFilter(&f))
		}
		for _, t := range r.Route.Select {
			tier := Tier{Type: backendType(t.Type), Order: slices.Clone(t.Order)}
			if t.Minimize != "" {
				tier.Minimize, _ = parseObjective(string(t.Minimize))
			}
			rule.Tiers = append(rule.Tiers, tier)
		}
		if r.Route.OnEmpty == v1alpha1.OnEmptyReject {
			rule.OnEmpty = Reject
		}
		pol.Rules = append(pol.Rules, rule)
	}
	return pol
}

func backendType(t v1alpha1.BackendType) BackendType {
	switch t {
	case v1alpha1.BackendLocal:
		return TypeLocal
	case v1alpha1.BackendProvider:
		return TypeProvider
	}
	return TypeAny
}

func compileFilter(f *v1alpha1.ExcludeFilter) Filter {
	out := Filter{Name: f.Name}
	if f.If != nil {
		m := Match(*f.If)
		out.If = &m
	}
	d := &f.Drop
	if b := d.Backend; b != nil {
		out.Type, out.Names, out.Models, out.Pool = backendType(b.Type), slices.Clone(b.Names), slices.Clone(b.Models), b.Pool
	}
	for _, r := range []struct {
		m Metric
		r *v1alpha1.NumberRange
	}{
		{MetricQueuedPrompts, d.QueuedPrompts}, {MetricRunningRequests, d.RunningRequests}, {MetricInFlight, d.InFlight},
		{MetricKVCacheUsage, d.KVCacheUsage}, {MetricPredictedTTFT, d.PredictedTTFT}, {MetricCachedTokens, d.CachedTokens},
	} {
		if r.r == nil {
			continue
		}
		for _, b := range []struct {
			op Op
			v  *float64
		}{{GreaterThan, r.r.GreaterThan}, {GreaterThanOrEqual, r.r.GreaterThanOrEqual}, {LessThan, r.r.LessThan}, {LessThanOrEqual, r.r.LessThanOrEqual}} {
			if b.v != nil {
				out.Predicates = append(out.Predicates, Predicate{Metric: r.m, Op: b.op, Value: *b.v})
			}
		}
	}
	return out
}

// build derives the lookup structures and labels from the exported
// fields. Compile and FromProto both end with it, so a snapshot received
// from policyd evaluates exactly like one compiled locally.
func (s *Snapshot) build() error {
	s.providers = make(map[string]*Provider, len(s.Providers))
	for i := range s.Providers {
		s.providers[s.Providers[i].Name] = &s.Providers[i]
	}
	s.sets = make(map[string]*WorkerSet, len(s.WorkerSets))
	for i := range s.WorkerSets {
		s.sets[s.WorkerSets[i].Name] = &s.WorkerSets[i]
	}
	policies := make(map[string]*Policy, len(s.Policies))
	for _, p := range s.Policies {
		if _, dup := policies[p.Name]; dup {
			return fmt.Errorf("policy %q defined twice", p.Name)
		}
		policies[p.Name] = p
		for _, r := range p.Rules {
			r.Policy = p.Name
			r.label = p.Name + "/" + r.Name
			for i := range r.Filters {
				r.Filters[i].ref = r.label + "/" + r.Filters[i].Name
			}
			for i := range r.Tiers {
				r.Tiers[i].label = tierLabel(i, &r.Tiers[i])
			}
		}
	}
	if len(s.Programs) == 0 {
		implicit := &Program{AuthMode: string(v1alpha1.AuthNone)}
		names := make([]string, 0, len(s.Policies))
		for _, p := range s.Policies {
			names = append(names, p.Name)
		}
		slices.Sort(names)
		for _, n := range names {
			implicit.Policies = append(implicit.Policies, PolicyRef{Name: n, Mode: ModeRoute})
		}
		s.Programs = []*Program{implicit}
	}
	s.programs = make(map[string]*Program, len(s.Programs))
	for _, prog := range s.Programs {
		if err := prog.build(policies); err != nil {
			return fmt.Errorf("gateway backend %q: %w", prog.Name, err)
		}
		s.programs[prog.Name] = prog
	}
	return nil
}

func tierLabel(i int, t *Tier) string {
	var b strings.Builder
	b.WriteString("select[")
	b.WriteString(strconv.Itoa(i))
	b.WriteString("] ")
	b.WriteString(t.Type.String())
	if len(t.Order) > 0 {
		b.WriteString(" order [")
		b.WriteString(strings.Join(t.Order, " "))
		b.WriteString("]")
	} else {
		b.WriteString(" minimize ")
		b.WriteString(t.Minimize.String())
	}
	return b.String()
}

func (p *Program) build(policies map[string]*Policy) error {
	p.route, p.guards = nil, nil
	for _, ref := range p.Policies {
		pol, ok := policies[ref.Name]
		if !ok {
			return fmt.Errorf("unknown policy %q", ref.Name)
		}
		if ref.Mode == ModeGuard {
			p.guards = append(p.guards, pol.Rules)
			continue
		}
		p.route = append(p.route, pol.Rules...)
	}
	// Index route rules by the model they can match, keeping their order,
	// so a request only looks at rules that could apply to its model.
	p.byModel = map[string][]int32{}
	p.anyModel = nil
	for i, r := range p.route {
		if anyModel(r) {
			p.anyModel = append(p.anyModel, int32(i))
			for m := range p.byModel {
				p.byModel[m] = append(p.byModel[m], int32(i))
			}
			continue
		}
		for _, m := range r.Matches {
			list, ok := p.byModel[m.Model]
			if !ok {
				list = slices.Clone(p.anyModel)
			}
			if n := len(list); n == 0 || list[n-1] != int32(i) {
				list = append(list, int32(i))
			}
			p.byModel[m.Model] = list
		}
	}
	p.tenants = make(map[string][]string, len(p.Tenants))
	for _, t := range p.Tenants {
		p.tenants[t.Tenant] = t.Tags
	}
	p.keys = make(map[[sha256.Size]byte]keyEntry)
	p.limits = map[string]tenantlimit.Tenant{}
	p.flows = make(map[string]TenantFlow, len(p.AuthTenants))
	p.tenantAllowed = nil
	p.authTenants = make(map[string]bool, len(p.AuthTenants))
	for _, t := range p.AuthTenants {
		p.authTenants[t.Name] = true
		p.flows[t.Name] = t.Flow.withDefaults()
		if len(t.AllowedTags) > 0 {
			if p.tenantAllowed == nil {
				p.tenantAllowed = map[string][]string{}
			}
			p.tenantAllowed[t.Name] = t.AllowedTags
		}
		if !t.Limits.IsZero() {
			p.limits[t.Name] = t.Limits
		}
		for _, k := range t.Keys {
			if prev, ok := p.keys[k]; ok && prev.tenant != t.Name {
				return fmt.Errorf("a key digest belongs to tenants %q and %q", prev.tenant, t.Name)
			}
			p.keys[k] = keyEntry{sum: k, tenant: t.Name}
		}
	}
	return nil
}

// appendDigest appends a validated "sha256:<hex>" digest.
func appendDigest(keys [][sha256.Size]byte, d string) [][sha256.Size]byte {
	var k [sha256.Size]byte
	if _, err := hex.Decode(k[:], []byte(strings.TrimPrefix(d, "sha256:"))); err != nil {
		return keys // validation refused it already
	}
	return append(keys, k)
}

// KeyTenant returns the tenant whose API key has the SHA-256 digest sum.
// The lookup is by digest, so it reveals nothing of any stored key's
// bytes that the presented key's hash does not; the final comparison is
// constant time all the same, so that no code path compares key material
// byte by byte with an early exit.
func (p *Program) KeyTenant(sum [sha256.Size]byte) (string, bool) {
	e, ok := p.keys[sum]
	if !ok || subtle.ConstantTimeCompare(e.sum[:], sum[:]) != 1 {
		return "", false
	}
	return e.tenant, true
}

// AuthKeys is how many key digests the program holds.
func (p *Program) AuthKeys() int { return len(p.keys) }

// keyEntry is one key digest and its tenant.
type keyEntry struct {
	sum    [sha256.Size]byte
	tenant string
}

// anyModel reports whether a rule can match a request for any model.
func anyModel(r *Rule) bool {
	return len(r.Matches) == 0 || slices.ContainsFunc(r.Matches, func(m Match) bool { return m.Model == "" })
}

// Program returns the program of the named GatewayBackend; name "" picks
// the only one, or the first by name when there are several. Nil when no
// such GatewayBackend exists.
func (s *Snapshot) Program(name string) *Program {
	if name == "" {
		if len(s.Programs) == 0 {
			return nil
		}
		return s.Programs[0]
	}
	return s.programs[name]
}

// DefaultProgram is the program of a router that follows no policies: no
// rules, every tag allowed, no tenant defaults. Every request it
// evaluates is default routing (the requested model's backends, lowest
// predicted TTFT), so a router without policyd decides by the same
// Evaluate as one with. Shared; like every built program, read-only.
func DefaultProgram() *Program { return defaultProgram }

var defaultProgram = func() *Program {
	p := &Program{AuthMode: string(v1alpha1.AuthNone)}
	if err := p.build(nil); err != nil {
		panic("policy: default program: " + err.Error()) // no policies: cannot fail
	}
	return p
}()

// Provider returns the named provider, or nil.
func (s *Snapshot) Provider(name string) *Provider { return s.providers[name] }

// WorkerSet returns the named worker set, or nil.
func (s *Snapshot) WorkerSet(name string) *WorkerSet { return s.sets[name] }

// TenantTags returns a tenant's default tags (shared; do not modify).
func (p *Program) TenantTags(tenant string) []string { return p.tenants[tenant] }

// TagAllowed reports whether clients may set tag through the tags header.
func (p *Program) TagAllowed(tag string) bool {
	return len(p.AllowedTags) == 0 || slices.Contains(p.AllowedTags, tag)
}

// TenantTagAllowed reports whether tenant's requests may set tag through
// the tags header: the program allows it, and so does the tenant's own
// list when it has one.
func (p *Program) TenantTagAllowed(tenant, tag string) bool {
	if !p.TagAllowed(tag) {
		return false
	}
	own, ok := p.tenantAllowed[tenant]
	return !ok || slices.Contains(own, tag)
}

// ConsiderModels appends to dst the models whose backends a decision for
// req may pick: the requested model and the consider lists of every route
// rule that matches. The router fills candidates for these models only.
func (p *Program) ConsiderModels(req *Request, dst []string) []string {
	dst = append(dst, req.Model)
	for _, ri := range p.rulesFor(req.Model) {
		r := p.route[ri]
		if !r.matches(req) {
			continue
		}
		for _, m := range r.Consider {
			if !slices.Contains(dst, m) {
				dst = append(dst, m)
			}
		}
		if r.OnEmpty == Reject {
			break
		}
	}
	return dst
}

func (p *Program) rulesFor(model string) []int32 {
	if l, ok := p.byModel[model]; ok {
		return l
	}
	return p.anyModel
}

// compileJWT is spec.auth.jwt with its defaults; validation checked it.
func compileJWT(j *v1alpha1.JWTAuth) *JWTAuth {
	out := &JWTAuth{Issuer: j.Issuer, Audiences: slices.Clone(j.Audiences), TenantClaim: j.TenantClaim, JWKSURL: j.JWKSURL,
		ClockSkew: DefaultJWTClockSkew, Refresh: DefaultJWTRefresh}
	if out.TenantClaim == "" {
		out.TenantClaim = DefaultJWTTenantClaim
	}
	if j.ClockSkew != nil {
		out.ClockSkew = j.ClockSkew.Duration
	}
	if j.RefreshInterval != nil {
		out.Refresh = j.RefreshInterval.Duration
	}
	return out
}

// compileLimits is a tenant entry's limits; validation checked them.
func compileLimits(l *v1alpha1.TenantLimits) tenantlimit.Tenant {
	if l == nil {
		return tenantlimit.Tenant{}
	}
	t := tenantlimit.Tenant{Limits: rateLimits(l.RateLimits)}
	for _, m := range l.Models {
		if t.Models == nil {
			t.Models = map[string]tenantlimit.Limits{}
		}
		t.Models[m.Model] = rateLimits(m.RateLimits)
	}
	return t
}

func rateLimits(r v1alpha1.RateLimits) tenantlimit.Limits {
	return tenantlimit.Limits{
		RequestsPerMinute:     r.RequestsPerMinute,
		InputTokensPerMinute:  r.InputTokensPerMinute,
		OutputTokensPerMinute: r.OutputTokensPerMinute,
		TokensPerDay:          r.TokensPerDay,
		TokensPerMonth:        r.TokensPerMonth,
	}
}
