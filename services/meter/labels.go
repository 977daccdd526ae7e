package meter

import (
	"strings"
	"sync/atomic"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/policy"
)

// Label values are bounded: a tenant or model is itself only when the
// configuration names it (policyd's snapshot, --tenants, --models), else
// "other". Clients choose model names and unauthenticated requests have
// none of their tenant's, so without the bound one client could create
// unbounded metric series and rollup fields.
const (
	// Other stands for every tenant or model the configuration does not
	// name.
	Other = "other"
	// Unauthenticated is the tenant of a request no credential named
	// (the event's tenant is empty); no tenant may be called so (names
	// start with a letter or digit).
	Unauthenticated = "-"
	// defaultTenant is the gateway's tenant without authentication
	// (services/gateway/admission/defaulttenant), always known.
	defaultTenant = "default"
)

// labels maps names to their bounded label values. Safe for concurrent
// use: the sets are swapped whole when policyd sends a new snapshot.
type labels struct {
	static  names
	current atomic.Pointer[names]
}

type names struct {
	tenants map[string]bool
	models  map[string]bool
}

func newLabels(tenants, models string) *labels {
	l := &labels{static: names{tenants: map[string]bool{defaultTenant: true}, models: map[string]bool{}}}
	for n := range strings.SplitSeq(tenants, ",") {
		if n = strings.TrimSpace(n); n != "" {
			l.static.tenants[n] = true
		}
	}
	for n := range strings.SplitSeq(models, ",") {
		if n = strings.TrimSpace(n); n != "" {
			l.static.models[n] = true
		}
	}
	l.current.Store(&l.static)
	return l
}

// update takes the tenants and models snap names (every GatewayBackend's
// tenants and public models, every worker set's and provider's models),
// with the static ones.
func (l *labels) update(snap *policy.Snapshot) {
	n := names{tenants: map[string]bool{}, models: map[string]bool{}}
	for t := range l.static.tenants {
		n.tenants[t] = true
	}
	for m := range l.static.models {
		n.models[m] = true
	}
	if snap != nil {
		for _, p := range snap.Programs {
			for _, t := range p.AuthTenants {
				n.tenants[t.Name] = true
			}
			for _, t := range p.Tenants {
				n.tenants[t.Tenant] = true
			}
			for _, m := range p.Models {
				n.models[m] = true
			}
		}
		for _, ws := range snap.WorkerSets {
			n.models[ws.Model] = true
		}
		for _, pr := range snap.Providers {
			for _, m := range pr.Models {
				n.models[m.Name] = true
			}
		}
	}
	l.current.Store(&n)
}

// tenant is a tenant's label value.
func (l *labels) tenant(t string) string {
	switch {
	case t == "":
		return Unauthenticated
	case l.current.Load().tenants[t]:
		return t
	}
	return Other
}

// model is a model's label value; a request refused before its body was
// read has none.
func (l *labels) model(m string) string {
	switch {
	case m == "":
		return "-"
	case l.current.Load().models[m]:
		return m
	}
	return Other
}

// outcome is an outcome's label value.
func outcome(o string) string {
	for _, known := range bus.UsageOutcomes {
		if o == known {
			return o
		}
	}
	return Other
}
