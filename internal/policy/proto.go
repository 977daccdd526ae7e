package policy

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/tenantlimit"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// ToProto encodes s for the wire with its revision. The encoding is the
// compiled form; FromProto rebuilds an equivalent snapshot.
func ToProto(s *Snapshot, revision int64) *policyv1.Snapshot {
	out := &policyv1.Snapshot{Revision: revision, CreatedAt: timestamppb.Now(), Warnings: DiagnosticsToProto(s.Warnings)}
	for _, w := range s.WorkerSets {
		pw := &policyv1.WorkerSet{
			Namespace: w.Namespace, Name: w.Name, Model: w.Model, Pool: w.Pool, Service: w.Service, Port: w.Port,
			MetricsPath: w.MetricsPath, BlockSize: w.BlockSize, KvEventsPort: w.KVEventsPort, KvReplayPort: w.KVReplayPort, KvTopic: w.KVTopic,
		}
		for _, st := range w.Static {
			pw.StaticWorkers = append(pw.StaticWorkers, &policyv1.StaticWorker{Id: st.ID, Url: st.URL, KvEventsEndpoint: st.KVEventsEndpoint, KvReplayEndpoint: st.KVReplayEndpoint})
		}
		out.WorkerSets = append(out.WorkerSets, pw)
	}
	for _, p := range s.Pools {
		pp := &policyv1.Pool{Namespace: p.Namespace, Name: p.Name, PrefillTokensPerSecond: p.PrefillTokensPerSecond,
			SecondsPerQueuedRequest: p.SecondsPerQueuedRequest, MaxQueuedPrompts: p.MaxQueuedPrompts, MaxKvCacheUsage: p.MaxKVCacheUsage}
		if p.ScrapeInterval > 0 {
			pp.ScrapeInterval = durationpb.New(p.ScrapeInterval)
		}
		out.Pools = append(out.Pools, pp)
	}
	for _, p := range s.Providers {
		pp := &policyv1.Provider{Namespace: p.Namespace, Name: p.Name, Type: p.Type, BaseUrl: p.BaseURL,
			Credentials:          &policyv1.Credentials{SecretName: p.Credentials.SecretName, SecretKey: p.Credentials.SecretKey, Env: p.Credentials.Env, File: p.Credentials.File},
			InputPricePerMillion: p.InputPrice, OutputPricePerMillion: p.OutputPrice, Currency: p.Currency}
		if p.Settings.BedrockRegion != "" {
			pp.Bedrock = &policyv1.BedrockSettings{Region: p.Settings.BedrockRegion}
		}
		if p.Settings.AzureAPIVersion != "" || p.Settings.AzureEntra != nil {
			pp.Azure = &policyv1.AzureOpenAISettings{ApiVersion: p.Settings.AzureAPIVersion}
			if e := p.Settings.AzureEntra; e != nil {
				pp.Azure.Entra = &policyv1.AzureEntra{TenantId: e.TenantID, ClientId: e.ClientID, AuthorityHost: e.AuthorityHost,
					ClientSecretName: e.SecretName, ClientSecretKey: e.SecretKey}
			}
		}
		if o := p.Settings.DatabricksOAuth; o != nil {
			pp.Databricks = &policyv1.DatabricksSettings{Oauth: &policyv1.DatabricksOAuth{ClientId: o.ClientID, ClientSecretName: o.SecretName, ClientSecretKey: o.SecretKey}}
		}
		for _, m := range p.Models {
			pp.Models = append(pp.Models, &policyv1.ProviderModel{Name: m.Name, ServedName: m.ServedName})
		}
		pp.MaxConcurrency = p.MaxConcurrency
		if b := p.Breaker; b != (Breaker{}) {
			pp.CircuitBreaker = &policyv1.CircuitBreaker{Failures: b.Failures}
			if b.OpenFor > 0 {
				pp.CircuitBreaker.OpenFor = durationpb.New(b.OpenFor)
			}
		}
		out.Providers = append(out.Providers, pp)
	}
	for _, p := range s.Policies {
		pp := &policyv1.Policy{Namespace: p.Namespace, Name: p.Name}
		for _, r := range p.Rules {
			pr := &policyv1.Rule{Name: r.Name, ConsiderModels: r.Consider, OnEmpty: policyv1.OnEmpty_ON_EMPTY_FALLBACK}
			if r.OnEmpty == Reject {
				pr.OnEmpty = policyv1.OnEmpty_ON_EMPTY_REJECT
			}
			for _, m := range r.Matches {
				pr.Matches = append(pr.Matches, &policyv1.Match{Model: m.Model, Tenant: m.Tenant, Tag: m.Tag})
			}
			for _, f := range r.Filters {
				pf := &policyv1.Filter{Name: f.Name, Type: policyv1.BackendType(f.Type), Names: f.Names, Models: f.Models, Pool: f.Pool}
				if f.If != nil {
					pf.Condition = &policyv1.Match{Model: f.If.Model, Tenant: f.If.Tenant, Tag: f.If.Tag}
				}
				for _, pd := range f.Predicates {
					pf.Predicates = append(pf.Predicates, &policyv1.Predicate{Metric: policyv1.Metric(pd.Metric + 1), Op: policyv1.Op(pd.Op + 1), Value: pd.Value})
				}
				pr.Filters = append(pr.Filters, pf)
			}
			for _, t := range r.Tiers {
				pr.Tiers = append(pr.Tiers, &policyv1.Tier{Type: policyv1.BackendType(t.Type), Minimize: policyv1.Objective(t.Minimize + 1), Order: t.Order})
			}
			pp.Rules = append(pp.Rules, pr)
		}
		out.Policies = append(out.Policies, pp)
	}
	for _, p := range s.Programs {
		if p.Name == "" {
			continue // the implicit program is rebuilt from the policies
		}
		pp := &policyv1.Program{Namespace: p.Namespace, Name: p.Name, Models: p.Models, AuthMode: p.AuthMode, TagsHeader: p.TagsHeader, AllowedTags: p.AllowedTags}
		for _, r := range p.Policies {
			mode := policyv1.PolicyMode_POLICY_MODE_ROUTE
			if r.Mode == ModeGuard {
				mode = policyv1.PolicyMode_POLICY_MODE_GUARD
			}
			pp.Policies = append(pp.Policies, &policyv1.PolicyRef{Name: r.Name, Mode: mode})
		}
		for _, t := range p.Tenants {
			pp.Tenants = append(pp.Tenants, &policyv1.TenantTags{Tenant: t.Tenant, Tags: t.Tags})
		}
		for _, t := range p.AuthTenants {
			at := &policyv1.AuthTenant{Name: t.Name, AllowedTags: t.AllowedTags,
				Weight: t.Flow.Weight, Priority: string(t.Flow.Priority), MaxPriority: string(t.Flow.MaxPriority)}
			for _, k := range t.Keys {
				at.KeySha256 = append(at.KeySha256, k[:])
			}
			if !t.Limits.Limits.IsZero() {
				at.Limits = limitsProto(t.Limits.Limits)
			}
			for _, m := range slices.Sorted(maps.Keys(t.Limits.Models)) {
				at.ModelLimits = append(at.ModelLimits, &policyv1.ModelRateLimits{Model: m, Limits: limitsProto(t.Limits.Models[m])})
			}
			pp.AuthTenants = append(pp.AuthTenants, at)
		}
		if j := p.JWT; j != nil {
			pp.Jwt = &policyv1.JWTAuth{Issuer: j.Issuer, Audiences: j.Audiences, TenantClaim: j.TenantClaim, JwksUrl: j.JWKSURL,
				ClockSkew: durationpb.New(j.ClockSkew), RefreshInterval: durationpb.New(j.Refresh)}
		}
		pp.Classifiers = classifiersProto(p.Classifiers)
		pp.Pii = piiProto(p.PII)
		out.Programs = append(out.Programs, pp)
	}
	return out
}

// FromProto decodes a snapshot received from policyd. It checks what the
// evaluator relies on (enums in range, policy references resolve), not
// the language rules policyd already enforced.
func FromProto(p *policyv1.Snapshot) (*Snapshot, error) {
	s := &Snapshot{Warnings: DiagnosticsFromProto(p.GetWarnings())}
	for _, w := range p.GetWorkerSets() {
		ws := WorkerSet{Namespace: w.GetNamespace(), Name: w.GetName(), Model: w.GetModel(), Pool: w.GetPool(), Service: w.GetService(),
			Port: w.GetPort(), MetricsPath: w.GetMetricsPath(), BlockSize: w.GetBlockSize(), KVEventsPort: w.GetKvEventsPort(),
			KVReplayPort: w.GetKvReplayPort(), KVTopic: w.GetKvTopic()}
		for _, st := range w.GetStaticWorkers() {
			ws.Static = append(ws.Static, StaticWorker{ID: st.GetId(), URL: st.GetUrl(), KVEventsEndpoint: st.GetKvEventsEndpoint(), KVReplayEndpoint: st.GetKvReplayEndpoint()})
		}
		s.WorkerSets = append(s.WorkerSets, ws)
	}
	for _, pp := range p.GetPools() {
		pool := Pool{Namespace: pp.GetNamespace(), Name: pp.GetName(), PrefillTokensPerSecond: pp.GetPrefillTokensPerSecond(),
			SecondsPerQueuedRequest: pp.GetSecondsPerQueuedRequest(), MaxQueuedPrompts: pp.GetMaxQueuedPrompts(), MaxKVCacheUsage: pp.GetMaxKvCacheUsage()}
		if d := pp.GetScrapeInterval(); d != nil {
			pool.ScrapeInterval = time.Duration(d.GetSeconds())*time.Second + time.Duration(d.GetNanos())
		}
		s.Pools = append(s.Pools, pool)
	}
	for _, pp := range p.GetProviders() {
		c := pp.GetCredentials()
		prov := Provider{Namespace: pp.GetNamespace(), Name: pp.GetName(), Type: pp.GetType(), BaseURL: pp.GetBaseUrl(),
			Credentials: Credentials{SecretName: c.GetSecretName(), SecretKey: c.GetSecretKey(), Env: c.GetEnv(), File: c.GetFile()},
			InputPrice:  pp.GetInputPricePerMillion(), OutputPrice: pp.GetOutputPricePerMillion(), Currency: pp.GetCurrency(),
			Settings: ProviderSettings{BedrockRegion: pp.GetBedrock().GetRegion(), AzureAPIVersion: pp.GetAzure().GetApiVersion()}}
		if e := pp.GetAzure().GetEntra(); e != nil {
			prov.Settings.AzureEntra = &AzureEntra{TenantID: e.GetTenantId(), ClientID: e.GetClientId(), AuthorityHost: e.GetAuthorityHost(),
				SecretName: e.GetClientSecretName(), SecretKey: e.GetClientSecretKey()}
		}
		if o := pp.GetDatabricks().GetOauth(); o != nil {
			prov.Settings.DatabricksOAuth = &DatabricksOAuth{ClientID: o.GetClientId(), SecretName: o.GetClientSecretName(), SecretKey: o.GetClientSecretKey()}
		}
		for _, m := range pp.GetModels() {
			prov.Models = append(prov.Models, ProviderModel{Name: m.GetName(), ServedName: m.GetServedName()})
		}
		prov.MaxConcurrency = pp.GetMaxConcurrency()
		if cb := pp.GetCircuitBreaker(); cb != nil {
			prov.Breaker.Failures = cb.GetFailures()
			if d := cb.GetOpenFor(); d != nil {
				prov.Breaker.OpenFor = d.AsDuration()
			}
		}
		s.Providers = append(s.Providers, prov)
	}
	for _, pp := range p.GetPolicies() {
		pol := &Policy{Namespace: pp.GetNamespace(), Name: pp.GetName()}
		for _, pr := range pp.GetRules() {
			r := &Rule{Name: pr.GetName(), Consider: pr.GetConsiderModels()}
			switch pr.GetOnEmpty() {
			case policyv1.OnEmpty_ON_EMPTY_REJECT:
				r.OnEmpty = Reject
			case policyv1.OnEmpty_ON_EMPTY_FALLBACK, policyv1.OnEmpty_ON_EMPTY_UNSPECIFIED:
			default:
				return nil, fmt.Errorf("policy %s rule %s: unknown onEmpty %d", pol.Name, r.Name, pr.GetOnEmpty())
			}
			for _, m := range pr.GetMatches() {
				r.Matches = append(r.Matches, Match{Model: m.GetModel(), Tenant: m.GetTenant(), Tag: m.GetTag()})
			}
			for _, pf := range pr.GetFilters() {
				t, err := backendTypeFromProto(pf.GetType())
				if err != nil {
					return nil, fmt.Errorf("policy %s rule %s filter %s: %w", pol.Name, r.Name, pf.GetName(), err)
				}
				f := Filter{Name: pf.GetName(), Type: t, Names: pf.GetNames(), Models: pf.GetModels(), Pool: pf.GetPool()}
				if c := pf.GetCondition(); c != nil {
					f.If = &Match{Model: c.GetModel(), Tenant: c.GetTenant(), Tag: c.GetTag()}
				}
				for _, pd := range pf.GetPredicates() {
					m, op := int(pd.GetMetric())-1, int(pd.GetOp())-1
					if m < 0 || m >= len(metricNames) || op < 0 || op >= len(opNames) {
						return nil, fmt.Errorf("policy %s rule %s filter %s: unknown metric %d or op %d", pol.Name, r.Name, f.Name, pd.GetMetric(), pd.GetOp())
					}
					f.Predicates = append(f.Predicates, Predicate{Metric: Metric(m), Op: Op(op), Value: pd.GetValue()})
				}
				r.Filters = append(r.Filters, f)
			}
			for _, pt := range pr.GetTiers() {
				t, err := backendTypeFromProto(pt.GetType())
				if err != nil {
					return nil, fmt.Errorf("policy %s rule %s: %w", pol.Name, r.Name, err)
				}
				o := int(pt.GetMinimize()) - 1
				if o < 0 {
					o = int(PredictedTTFT)
				}
				if o >= len(objectiveNames) {
					return nil, fmt.Errorf("policy %s rule %s: unknown objective %d", pol.Name, r.Name, pt.GetMinimize())
				}
				r.Tiers = append(r.Tiers, Tier{Type: t, Minimize: Objective(o), Order: pt.GetOrder()})
			}
			pol.Rules = append(pol.Rules, r)
		}
		s.Policies = append(s.Policies, pol)
	}
	for _, pp := range p.GetPrograms() {
		prog := &Program{Namespace: pp.GetNamespace(), Name: pp.GetName(), Models: pp.GetModels(), AuthMode: pp.GetAuthMode(),
			TagsHeader: pp.GetTagsHeader(), AllowedTags: pp.GetAllowedTags()}
		for _, r := range pp.GetPolicies() {
			mode := ModeRoute
			if r.GetMode() == policyv1.PolicyMode_POLICY_MODE_GUARD {
				mode = ModeGuard
			}
			prog.Policies = append(prog.Policies, PolicyRef{Name: r.GetName(), Mode: mode})
		}
		for _, t := range pp.GetTenants() {
			prog.Tenants = append(prog.Tenants, TenantTags{Tenant: t.GetTenant(), Tags: t.GetTags()})
		}
		for _, t := range pp.GetAuthTenants() {
			at := AuthTenant{Name: t.GetName(), AllowedTags: t.GetAllowedTags(), Flow: TenantFlow{
				Weight: t.GetWeight(), Priority: v1alpha1.Priority(t.GetPriority()), MaxPriority: v1alpha1.Priority(t.GetMaxPriority()),
			}}
			if at.Flow.Weight < 0 || at.Flow.Weight > 1000 || at.Flow.Priority.Rank() < 0 || at.Flow.MaxPriority.Rank() < 0 {
				return nil, fmt.Errorf("gateway backend %s tenant %s: weight %d, priority %q, max priority %q: want a weight of 1 to 1000 and Critical, Standard or Sheddable",
					pp.GetName(), t.GetName(), at.Flow.Weight, at.Flow.Priority, at.Flow.MaxPriority)
			}
			for _, k := range t.GetKeySha256() {
				if len(k) != sha256.Size {
					return nil, fmt.Errorf("gateway backend %s tenant %s: key digest of %d bytes, want %d", pp.GetName(), t.GetName(), len(k), sha256.Size)
				}
				at.Keys = append(at.Keys, [sha256.Size]byte(k))
			}
			at.Limits.Limits = limitsFromProto(t.GetLimits())
			for _, m := range t.GetModelLimits() {
				if at.Limits.Models == nil {
					at.Limits.Models = map[string]tenantlimit.Limits{}
				}
				at.Limits.Models[m.GetModel()] = limitsFromProto(m.GetLimits())
			}
			if err := at.Limits.Limits.Validate("limits"); err != nil {
				return nil, fmt.Errorf("gateway backend %s tenant %s: %w", pp.GetName(), t.GetName(), err)
			}
			for m, l := range at.Limits.Models {
				if err := l.Validate("limits.models[" + m + "]"); err != nil {
					return nil, fmt.Errorf("gateway backend %s tenant %s: %w", pp.GetName(), t.GetName(), err)
				}
			}
			prog.AuthTenants = append(prog.AuthTenants, at)
		}
		if j := pp.GetJwt(); j != nil {
			prog.JWT = &JWTAuth{Issuer: j.GetIssuer(), Audiences: j.GetAudiences(), TenantClaim: j.GetTenantClaim(), JWKSURL: j.GetJwksUrl(),
				ClockSkew: j.GetClockSkew().AsDuration(), Refresh: j.GetRefreshInterval().AsDuration()}
			if prog.JWT.Issuer == "" || len(prog.JWT.Audiences) == 0 || prog.JWT.TenantClaim == "" || prog.JWT.JWKSURL == "" || prog.JWT.Refresh <= 0 || prog.JWT.ClockSkew < 0 {
				return nil, fmt.Errorf("gateway backend %s: incomplete jwt settings", pp.GetName())
			}
		}
		var err error
		if prog.Classifiers, err = classifiersFromProto(pp.GetName(), pp.GetClassifiers()); err != nil {
			return nil, err
		}
		if prog.PII, err = piiFromProto(pp.GetName(), pp.GetPii()); err != nil {
			return nil, err
		}
		s.Programs = append(s.Programs, prog)
	}
	if err := s.build(); err != nil {
		return nil, err
	}
	return s, nil
}

func backendTypeFromProto(t policyv1.BackendType) (BackendType, error) {
	switch t {
	case policyv1.BackendType_BACKEND_TYPE_UNSPECIFIED:
		return TypeAny, nil
	case policyv1.BackendType_BACKEND_TYPE_LOCAL:
		return TypeLocal, nil
	case policyv1.BackendType_BACKEND_TYPE_PROVIDER:
		return TypeProvider, nil
	}
	return 0, fmt.Errorf("unknown backend type %d", t)
}

// DiagnosticsToProto encodes diagnostics.
func DiagnosticsToProto(ds Diagnostics) []*policyv1.Diagnostic {
	out := make([]*policyv1.Diagnostic, 0, len(ds))
	for _, d := range ds {
		sev := policyv1.Severity_SEVERITY_ERROR
		if d.Severity == SeverityWarning {
			sev = policyv1.Severity_SEVERITY_WARNING
		}
		out = append(out, &policyv1.Diagnostic{Severity: sev, File: d.File, Line: int32(d.Line), Column: int32(d.Column),
			Kind: d.Kind, Namespace: d.Namespace, Name: d.Name, Path: d.Path, Message: d.Message})
	}
	return out
}

// DiagnosticsFromProto decodes diagnostics.
func DiagnosticsFromProto(ps []*policyv1.Diagnostic) Diagnostics {
	var out Diagnostics
	for _, p := range ps {
		sev := SeverityError
		if p.GetSeverity() == policyv1.Severity_SEVERITY_WARNING {
			sev = SeverityWarning
		}
		out = append(out, Diagnostic{Severity: sev, File: p.GetFile(), Line: int(p.GetLine()), Column: int(p.GetColumn()),
			Kind: p.GetKind(), Namespace: p.GetNamespace(), Name: p.GetName(), Path: p.GetPath(), Message: p.GetMessage()})
	}
	return out
}

func limitsProto(l tenantlimit.Limits) *policyv1.RateLimits {
	return &policyv1.RateLimits{
		RequestsPerMinute:     l.RequestsPerMinute,
		InputTokensPerMinute:  l.InputTokensPerMinute,
		OutputTokensPerMinute: l.OutputTokensPerMinute,
		TokensPerDay:          l.TokensPerDay,
		TokensPerMonth:        l.TokensPerMonth,
	}
}

func limitsFromProto(l *policyv1.RateLimits) tenantlimit.Limits {
	return tenantlimit.Limits{
		RequestsPerMinute:     l.GetRequestsPerMinute(),
		InputTokensPerMinute:  l.GetInputTokensPerMinute(),
		OutputTokensPerMinute: l.GetOutputTokensPerMinute(),
		TokensPerDay:          l.GetTokensPerDay(),
		TokensPerMonth:        l.GetTokensPerMonth(),
	}
}
