package policy

import (
	"fmt"
	"maps"
	"slices"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

// catalog indexes the resources by name for the cross-resource checks.
// Names are one flat space per kind: policyd serves one snapshot per
// namespace set, and rules refer to providers and worker sets by name.
type catalog struct {
	workerSets, pools, providers, policies, backends map[string]*Object
	// served maps a model to the worker sets and providers serving it.
	served map[string][]*Object
	// aliases are models that a rule matches by name and routes with an
	// explicit consider list.
	aliases map[string]bool
	// complete is true when the input holds a catalog (at least one
	// worker set or provider); without one, references to models and
	// providers cannot be checked.
	complete bool
}

func (c *checker) index(objs []*Object) *catalog {
	cat := &catalog{
		workerSets: map[string]*Object{}, pools: map[string]*Object{}, providers: map[string]*Object{},
		policies: map[string]*Object{}, backends: map[string]*Object{},
		served: map[string][]*Object{}, aliases: map[string]bool{},
	}
	for _, o := range objs {
		var m map[string]*Object
		switch o.Kind {
		case v1alpha1.KindInferenceWorkerSet:
			m = cat.workerSets
		case v1alpha1.KindInferencePool:
			m = cat.pools
		case v1alpha1.KindInferenceProvider:
			m = cat.providers
		case v1alpha1.KindInferencePolicy:
			m = cat.policies
		case v1alpha1.KindGatewayBackend:
			m = cat.backends
		}
		if o.Name == "" {
			continue
		}
		if prev, dup := m[o.Name]; dup {
			c.err(o, "metadata.name", "%s %q is already defined%s", o.Kind, o.Name, where(prev))
			continue
		}
		m[o.Name] = o
	}
	for name, o := range cat.workerSets {
		if prev, clash := cat.providers[name]; clash {
			c.err(o, "metadata.name", "name %q is also an InferenceProvider's%s: rules could not tell them apart", name, where(prev))
		}
	}
	for _, o := range sortedObjects(cat.workerSets) {
		if !o.broken && o.WorkerSet.Spec.Model != "" {
			cat.served[o.WorkerSet.Spec.Model] = append(cat.served[o.WorkerSet.Spec.Model], o)
		}
	}
	for _, o := range sortedObjects(cat.providers) {
		if o.broken {
			continue
		}
		for _, m := range o.Provider.Spec.Models {
			if m.Name != "" {
				cat.served[m.Name] = append(cat.served[m.Name], o)
			}
		}
	}
	cat.complete = len(cat.workerSets)+len(cat.providers) > 0
	for _, o := range cat.policies {
		if o.broken {
			continue
		}
		for _, r := range o.Policy.Spec.Rules {
			if len(r.Route.Consider) == 0 {
				continue
			}
			for _, m := range r.Matches {
				if m.Model != "" {
					cat.aliases[m.Model] = true
				}
			}
		}
	}
	return cat
}

func where(o *Object) string {
	if o.File == "" {
		return ""
	}
	p := o.start
	if p.Line > 0 {
		return fmt.Sprintf(" at %s:%d", o.File, p.Line)
	}
	return " in " + o.File
}

func sortedObjects(m map[string]*Object) []*Object {
	names := slices.Sorted(maps.Keys(m))
	out := make([]*Object, len(names))
	for i, n := range names {
		out[i] = m[n]
	}
	return out
}

func (cat *catalog) servedModels() []string {
	return slices.Sorted(maps.Keys(cat.served))
}

func (cat *catalog) groupNames() []string {
	names := slices.Collect(maps.Keys(cat.providers))
	names = append(names, slices.Collect(maps.Keys(cat.workerSets))...)
	slices.Sort(names)
	return names
}

// crossCheck runs the checks that involve several resources.
func (c *checker) crossCheck(cat *catalog) {
	endpointIDs := map[string]*Object{}
	for _, o := range sortedObjects(cat.workerSets) {
		if o.broken {
			continue
		}
		s := &o.WorkerSet.Spec
		if s.Pool != "" {
			if _, ok := cat.pools[s.Pool]; !ok {
				c.err(o, "spec.pool", "unknown InferencePool %q%s", s.Pool, didYouMean(s.Pool, slices.Sorted(maps.Keys(cat.pools))))
			}
		}
		for i, w := range s.Static {
			if prev, dup := endpointIDs[w.ID]; dup && prev != o {
				c.err(o, idx("spec.static", i)+".id", "endpoint id %q is also used by %s", w.ID, prev.Ref())
			}
			endpointIDs[w.ID] = o
		}
	}
	if !cat.complete && len(cat.policies)+len(cat.backends) > 0 {
		c.diags = append(c.diags, Diagnostic{Severity: SeverityWarning,
			Message: "no InferenceWorkerSet or InferenceProvider given: references to models and providers were not checked"})
	}
	for _, o := range sortedObjects(cat.policies) {
		if !o.broken {
			c.checkPolicy(o, cat)
		}
	}
	used := map[string]bool{}
	for _, o := range sortedObjects(cat.backends) {
		if o.broken {
			continue
		}
		c.checkBackend(o, cat)
		for _, r := range o.Backend.Spec.Policies {
			used[r.Name] = true
		}
	}
	if len(cat.backends) > 0 {
		for _, o := range sortedObjects(cat.policies) {
			if !used[o.Name] {
				c.warn(o, "metadata.name", "no GatewayBackend lists this policy: it applies to no request")
			}
		}
	} else {
		// The implicit program applies every policy by name: its order
		// was not chosen by anyone, so shadowing across policies is only
		// a warning there.
		var refs []ruleRef
		for _, o := range sortedObjects(cat.policies) {
			if !o.broken {
				refs = appendRuleRefs(refs, o)
			}
		}
		c.checkCrossPolicyReach(nil, refs, SeverityWarning)
	}
}

func (c *checker) checkBackend(o *Object, cat *catalog) {
	s := &o.Backend.Spec
	var refs []ruleRef
	for i, r := range s.Policies {
		p, ok := cat.policies[r.Name]
		if !ok {
			c.err(o, idx("spec.policies", i)+".name", "unknown InferencePolicy %q%s", r.Name, didYouMean(r.Name, slices.Sorted(maps.Keys(cat.policies))))
			continue
		}
		if r.Mode != v1alpha1.PolicyModeGuard && !p.broken {
			refs = appendRuleRefs(refs, p)
		}
	}
	c.checkCrossPolicyReach(o, refs, SeverityError)
	if !cat.complete {
		return
	}
	for i, m := range s.Models {
		if _, ok := cat.served[m.Name]; !ok && !cat.aliases[m.Name] {
			c.err(o, idx("spec.models", i)+".name", "model %q is served by no InferenceWorkerSet or InferenceProvider and no rule makes it an alias%s", m.Name, didYouMean(m.Name, cat.servedModels()))
		}
	}
}

// ruleRef is a rule with the object it is in, for reachability checks.
type ruleRef struct {
	o    *Object
	i    int
	rule *v1alpha1.PolicyRule
}

func appendRuleRefs(refs []ruleRef, o *Object) []ruleRef {
	for i := range o.Policy.Spec.Rules {
		refs = append(refs, ruleRef{o, i, &o.Policy.Spec.Rules[i]})
	}
	return refs
}

// checkCrossPolicyReach reports rules of a later policy that an earlier
// policy's rule shadows, in the order a GatewayBackend (or, when gw is
// nil, the implicit by-name order) applies them.
func (c *checker) checkCrossPolicyReach(gw *Object, refs []ruleRef, sev Severity) {
	for i, later := range refs {
		for _, earlier := range refs[:i] {
			if earlier.o == later.o || !covers(earlier.rule.Matches, later.rule.Matches) {
				continue
			}
			in := "in the implicit policy order (by name; add a GatewayBackend to choose one)"
			if gw != nil {
				in = "in GatewayBackend " + gw.Name
			}
			p := idx("spec.rules", later.i)
			if earlier.rule.Route.OnEmpty == v1alpha1.OnEmptyReject {
				c.diags = append(c.diags, later.o.diag(sev, p, "rule %q is unreachable %s: rule %s/%s comes first, matches every request this one matches, and rejects when empty",
					later.rule.Name, in, earlier.o.Name, earlier.rule.Name))
			} else {
				c.diags = append(c.diags, later.o.diag(SeverityWarning, p, "rule %q is only reached %s when rule %s/%s, which comes first and matches every request this one matches, finds no backend",
					later.rule.Name, in, earlier.o.Name, earlier.rule.Name))
			}
			break
		}
	}
}

// covers reports whether every request matching b also matches a (a's
// entries being at least as general).
func covers(a, b []v1alpha1.Match) bool {
	if len(a) == 0 {
		return true
	}
	if len(b) == 0 {
		return false
	}
	for _, mb := range b {
		if !slices.ContainsFunc(a, func(ma v1alpha1.Match) bool { return entryCovers(ma, mb) }) {
			return false
		}
	}
	return true
}

func entryCovers(a, b v1alpha1.Match) bool {
	return (a.Model == "" || a.Model == b.Model) &&
		(a.Tenant == "" || a.Tenant == b.Tenant) &&
		(a.Tag == "" || a.Tag == b.Tag)
}

func (c *checker) checkPolicy(o *Object, cat *catalog) {
	rules := o.Policy.Spec.Rules
	for i := range rules {
		r := &rules[i]
		p := idx("spec.rules", i)
		for j := range i {
			e := &rules[j]
			if !covers(e.Matches, r.Matches) {
				continue
			}
			if e.Route.OnEmpty == v1alpha1.OnEmptyReject {
				c.err(o, p, "rule %q is unreachable: rule %q (spec.rules[%d]) matches every request this one matches and rejects when empty", r.Name, e.Name, j)
			} else {
				c.warn(o, p, "rule %q is only reached when rule %q (spec.rules[%d]), which matches every request this one matches, finds no backend", r.Name, e.Name, j)
			}
			break
		}
		c.checkRule(o, p, r, cat)
	}
}

// typeOf returns the backend type of a provider or worker-set name.
func (cat *catalog) typeOf(name string) (v1alpha1.BackendType, bool) {
	if _, ok := cat.providers[name]; ok {
		return v1alpha1.BackendProvider, true
	}
	if _, ok := cat.workerSets[name]; ok {
		return v1alpha1.BackendLocal, true
	}
	return "", false
}

// serves reports whether the named group serves any of models.
func (cat *catalog) serves(name string, models []string) bool {
	for _, m := range models {
		for _, o := range cat.served[m] {
			if o.Name == name {
				return true
			}
		}
	}
	return false
}

// anyOfType reports whether a backend of type t (any when empty) serves
// one of models.
func (cat *catalog) anyOfType(t v1alpha1.BackendType, models []string) bool {
	for _, m := range models {
		for _, o := range cat.served[m] {
			if t == "" || (t == v1alpha1.BackendProvider) == (o.Kind == v1alpha1.KindInferenceProvider) {
				return true
			}
		}
	}
	return false
}

func (c *checker) checkRule(o *Object, p string, r *v1alpha1.PolicyRule, cat *catalog) {
	rt := &r.Route
	// The models the rule can route to, when they are known statically:
	// its consider list, or the model every match entry names.
	var models []string
	for _, ce := range rt.Consider {
		if ce.Models != nil {
			models = append(models, ce.Models.Names...)
		}
	}
	explicit := len(models) > 0
	if !explicit && len(r.Matches) > 0 && !slices.ContainsFunc(r.Matches, func(m v1alpha1.Match) bool { return m.Model == "" }) {
		for _, m := range r.Matches {
			models = append(models, m.Model)
		}
	}
	if cat.complete {
		for j, m := range r.Matches {
			mp := idx(p+".matches", j) + ".model"
			if m.Model == "" {
				continue
			}
			_, served := cat.served[m.Model]
			if !served && !explicit && !cat.aliases[m.Model] {
				c.err(o, mp, "model %q is served by no InferenceWorkerSet or InferenceProvider and no rule makes it an alias%s", m.Model, didYouMean(m.Model, cat.servedModels()))
			}
			if served && explicit && m.Tenant == "" && m.Tag == "" && !slices.Contains(models, m.Model) {
				c.err(o, mp, "alias %q shadows the model of that name served by %s: every request for it goes to %s instead; add it to consider or narrow the match with a tag or tenant",
					m.Model, cat.served[m.Model][0].Ref(), quoteList(models))
			}
		}
		for j, ce := range rt.Consider {
			if ce.Models == nil {
				continue
			}
			for k, n := range ce.Models.Names {
				if _, ok := cat.served[n]; !ok {
					c.err(o, idx(idx(p+".route.consider", j)+".models.names", k), "model %q is served by no InferenceWorkerSet or InferenceProvider%s", n, didYouMean(n, cat.servedModels()))
				}
			}
		}
	}
	// Filters that drop every backend of a type, whatever the request.
	dropsAll := map[v1alpha1.BackendType]string{}
	for j := range rt.Exclude {
		f := &rt.Exclude[j]
		fp := idx(p+".route.exclude", j)
		d := &f.Drop
		if b := d.Backend; b != nil && cat.complete {
			for k, n := range b.Names {
				if _, ok := cat.typeOf(n); !ok {
					c.err(o, idx(fp+".drop.backend.names", k), "unknown InferenceProvider or InferenceWorkerSet %q%s", n, didYouMean(n, cat.groupNames()))
				}
			}
			for k, m := range b.Models {
				if _, ok := cat.served[m]; !ok {
					c.err(o, idx(fp+".drop.backend.models", k), "model %q is served by no InferenceWorkerSet or InferenceProvider%s", m, didYouMean(m, cat.servedModels()))
				}
			}
			if b.Pool != "" {
				if _, ok := cat.pools[b.Pool]; !ok {
					c.err(o, fp+".drop.backend.pool", "unknown InferencePool %q%s", b.Pool, didYouMean(b.Pool, slices.Sorted(maps.Keys(cat.pools))))
				}
			}
		}
		if f.If == nil && d.Backend != nil && d.Backend.Type != "" && len(d.Backend.Names) == 0 && len(d.Backend.Models) == 0 && d.Backend.Pool == "" &&
			d.QueuedPrompts == nil && d.RunningRequests == nil && d.InFlight == nil && d.KVCacheUsage == nil && d.PredictedTTFT == nil && d.CachedTokens == nil {
			dropsAll[d.Backend.Type] = f.Name
		}
	}
	// Tiers that can never match.
	for j := range rt.Select {
		t := &rt.Select[j]
		tp := idx(p+".route.select", j)
		for k := range j {
			e := &rt.Select[k]
			if len(e.Order) > 0 {
				continue
			}
			if e.Type == "" {
				c.err(o, tp, "tier can never match: select[%d] already takes every remaining candidate", k)
				break
			}
			if e.Type == t.Type {
				c.err(o, tp, "tier can never match: select[%d] already takes every %s candidate", k, e.Type)
				break
			}
		}
		if t.Type != "" {
			if name, ok := dropsAll[t.Type]; ok {
				c.err(o, tp, "tier can never match: exclude %q drops every %s backend", name, t.Type)
			}
		}
		if !cat.complete {
			continue
		}
		known := 0
		for k, n := range t.Order {
			typ, ok := cat.typeOf(n)
			if !ok {
				c.err(o, idx(tp+".order", k), "unknown InferenceProvider or InferenceWorkerSet %q%s", n, didYouMean(n, cat.groupNames()))
				continue
			}
			if t.Type != "" && typ != t.Type {
				c.err(o, idx(tp+".order", k), "%q is a %s backend, but this tier only takes %s ones", n, typ, t.Type)
				continue
			}
			if len(models) > 0 && !cat.serves(n, models) {
				c.warn(o, idx(tp+".order", k), "%q serves none of %s", n, quoteList(models))
				continue
			}
			known++
		}
		if len(models) == 0 {
			continue
		}
		if len(t.Order) > 0 && known == 0 {
			c.err(o, tp, "tier can never match: no backend in order serves %s", quoteList(models))
		} else if len(t.Order) == 0 && !cat.anyOfType(t.Type, models) {
			what := "backend"
			if t.Type != "" {
				what = string(t.Type) + " backend"
			}
			c.err(o, tp, "tier can never match: no %s serves %s", what, quoteList(models))
		}
	}
}
