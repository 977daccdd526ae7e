package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-dev/switchyard/internal/fleet"
)

// State is a description of the fleet's live state, for offline Explain
// (yardctl explain --state): the load and cache state of each backend by
// endpoint id. Backends of the catalog that it does not mention are idle.
//
//	backends:
//	  sim-0: {queuedPrompts: 3, kvCacheUsage: 0.4, predictedTTFT: 0.2, cachedTokens: 1200}
//	  provider/bedrock: {predictedTTFT: 0.6}
//	  sim-9: {group: qwen-workers, model: qwen-3.6-27b}   # not in the catalog
type State struct {
	Backends map[string]BackendState `json:"backends"`
	// Order lists endpoint ids not in the catalog in the order they are
	// scanned; filled by ParseState from the file's order.
	order []string
}

// BackendState is one backend's live state in a State file.
type BackendState struct {
	// Group and Model place an endpoint the catalog does not list (one
	// discovered in Kubernetes); Type defaults from the group.
	Group string `json:"group,omitempty"`
	Model string `json:"model,omitempty"`
	Type  string `json:"type,omitempty"`
	Pool  string `json:"pool,omitempty"`
	// Unavailable marks it unhealthy or excluded, with the reason.
	Unavailable     string   `json:"unavailable,omitempty"`
	QueuedPrompts   int64    `json:"queuedPrompts,omitempty"`
	RunningRequests int64    `json:"runningRequests,omitempty"`
	InFlight        int64    `json:"inFlight,omitempty"`
	KVCacheUsage    float64  `json:"kvCacheUsage,omitempty"`
	PredictedTTFT   *float64 `json:"predictedTTFT,omitempty"`
	CachedTokens    int64    `json:"cachedTokens,omitempty"`
	Price           *float64 `json:"price,omitempty"`
}

// ParseState reads a state file (YAML or JSON). Unknown fields are errors.
func ParseState(data []byte) (*State, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("state larger than %d bytes", maxFileBytes)
	}
	var st State
	if err := yaml.UnmarshalStrict(data, &st); err != nil {
		return nil, fmt.Errorf("parse state: %w", err)
	}
	// The map loses the file's order; recover it so that scan order (and
	// so near-tie breaking) follows the file.
	st.order = keysInOrder(data)
	for id, b := range st.Backends {
		if id == "" {
			return nil, fmt.Errorf("state: empty backend id")
		}
		if b.QueuedPrompts < 0 || b.RunningRequests < 0 || b.InFlight < 0 || b.CachedTokens < 0 {
			return nil, fmt.Errorf("state: backend %s: counts must not be negative", id)
		}
		if b.KVCacheUsage < 0 || b.KVCacheUsage > 1 || math.IsNaN(b.KVCacheUsage) {
			return nil, fmt.Errorf("state: backend %s: kvCacheUsage %g: want a fraction in 0..1", id, b.KVCacheUsage)
		}
		if b.PredictedTTFT != nil && (*b.PredictedTTFT < 0 || math.IsNaN(*b.PredictedTTFT) || math.IsInf(*b.PredictedTTFT, 0)) {
			return nil, fmt.Errorf("state: backend %s: predictedTTFT must be a non-negative number of seconds", id)
		}
		switch b.Type {
		case "", "Local", "Provider":
		default:
			return nil, fmt.Errorf("state: backend %s: type %q: want Local or Provider", id, b.Type)
		}
	}
	return &st, nil
}

// keysInOrder returns the keys of the backends mapping in file order.
func keysInOrder(data []byte) []string {
	var doc yaml3.Node
	if yaml3.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml3.MappingNode {
		return nil
	}
	var keys []string
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "backends" || root.Content[i+1].Kind != yaml3.MappingNode {
			continue
		}
		m := root.Content[i+1]
		for k := 0; k+1 < len(m.Content); k += 2 {
			keys = append(keys, m.Content[k].Value)
		}
	}
	return keys
}

// ProviderEndpointID is the endpoint id of a provider in decisions.
func ProviderEndpointID(name string) string { return fleet.ProviderID(name) }

// Backends lists the snapshot's backends with the state applied: every
// static worker of every worker set (by set name, in listed order), every
// provider once per model it serves (by name), then the state's endpoints
// that the catalog does not list, in file order. st may be nil.
func (s *Snapshot) Backends(st *State) ([]Backend, error) {
	var bs []Backend
	seen := map[string]bool{}
	get := func(id string) BackendState {
		if st == nil {
			return BackendState{}
		}
		return st.Backends[id]
	}
	for _, ws := range s.WorkerSets {
		for _, w := range ws.Static {
			seen[w.ID] = true
			bs = append(bs, withState(Backend{ID: w.ID, Model: ws.Model, Type: TypeLocal, Group: ws.Name, Pool: ws.Pool}, get(w.ID)))
		}
	}
	for _, p := range s.Providers {
		id := ProviderEndpointID(p.Name)
		seen[id] = true
		for _, m := range p.Models {
			bs = append(bs, withState(Backend{ID: id, Model: m.Name, Type: TypeProvider, Group: p.Name, Price: p.InputPrice}, get(id)))
		}
	}
	if st == nil {
		return bs, nil
	}
	order := st.order
	for _, id := range slices.Sorted(maps.Keys(st.Backends)) {
		if !slices.Contains(order, id) {
			order = append(order, id) // keys the order scan missed
		}
	}
	for _, id := range order {
		if _, ok := st.Backends[id]; !ok || seen[id] {
			continue
		}
		seen[id] = true
		b := st.Backends[id]
		if b.Model == "" {
			return nil, fmt.Errorf("state: backend %s is not in the catalog: give its model and group", id)
		}
		typ := TypeLocal
		switch {
		case b.Type == "Provider":
			typ = TypeProvider
		case b.Type == "" && s.Provider(b.Group) != nil:
			typ = TypeProvider
		}
		pool := b.Pool
		if ws := s.WorkerSet(b.Group); ws != nil && pool == "" {
			pool = ws.Pool
		}
		bs = append(bs, withState(Backend{ID: id, Model: b.Model, Type: typ, Group: b.Group, Pool: pool}, b))
	}
	return bs, nil
}

func withState(b Backend, s BackendState) Backend {
	b.Unavailable = s.Unavailable
	b.QueuedPrompts, b.RunningRequests, b.InFlight = s.QueuedPrompts, s.RunningRequests, s.InFlight
	b.KVCacheUsage, b.CachedTokens = s.KVCacheUsage, s.CachedTokens
	if s.PredictedTTFT != nil {
		b.PredictedTTFT = *s.PredictedTTFT
	}
	if s.Price != nil {
		b.Price = *s.Price
	}
	return b
}
