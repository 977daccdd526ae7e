package policy

import (
	"fmt"
	"strings"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

// Pos is a line and column in a YAML file, 1-based.
type Pos struct{ Line, Column int }

// Object is one Switchyard resource with where it came from. Exactly one of
// the typed pointers is set, matching Kind.
type Object struct {
	Kind       string
	Namespace  string
	Name       string
	Generation int64
	// File is the YAML file it was read from; empty for Kubernetes.
	File string

	WorkerSet *v1alpha1.InferenceWorkerSet
	Pool      *v1alpha1.InferencePool
	Provider  *v1alpha1.InferenceProvider
	Policy    *v1alpha1.InferencePolicy
	Backend   *v1alpha1.GatewayBackend

	// KeySecrets are the Secrets a GatewayBackend's tenants name
	// (spec.tenants[].keysSecret) as the source read them, by name. Only
	// the Kubernetes source reads Secrets; a name missing here was not
	// read, and validation refuses the tenant.
	KeySecrets map[string]KeySecret

	// pos maps YAML paths (spec.rules[0].name) to their position; nil for
	// objects that did not come from YAML.
	pos map[string]Pos
	// start is the document's position.
	start Pos
	// broken is set when decoding failed: the object's own checks are
	// skipped (its decode errors say enough) but its name still resolves
	// references, so one typo does not cascade into many errors.
	broken      bool
	decodeDiags Diagnostics
}

// KeySecret is a Secret of key digests as a source read it: every data
// value is one digest ("sha256:<64 hex>"), by data key. Missing means the
// Secret does not exist: no keys (deleting it revokes them). Err says why
// it could not be read otherwise (forbidden); its values are then
// unknown, and the GatewayBackend is refused.
type KeySecret struct {
	Digests map[string]string
	Missing bool
	Err     string
	// Offline marks a Secret nobody read because the check runs offline
	// (yardctl validate of Kubernetes manifests): its name is accepted and
	// counted as holding keys, and nothing is compiled from it.
	Offline bool
}

// AssumeKeySecrets marks every Secret the GatewayBackends' tenants name
// as read Offline, for checking Kubernetes manifests without a cluster.
func AssumeKeySecrets(objs []*Object) {
	for _, o := range objs {
		if o.Backend == nil {
			continue
		}
		for _, t := range o.Backend.Spec.Tenants {
			if t.KeysSecret == "" {
				continue
			}
			if o.KeySecrets == nil {
				o.KeySecrets = map[string]KeySecret{}
			}
			o.KeySecrets[t.KeysSecret] = KeySecret{Offline: true}
		}
	}
}

// DecodeDiagnostics are the problems found decoding the object's YAML.
func (o *Object) DecodeDiagnostics() Diagnostics { return o.decodeDiags }

// Ref renders "Kind namespace/name".
func (o *Object) Ref() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// ObjectOf wraps a typed resource (as read from Kubernetes) in an Object.
func ObjectOf(v any) (*Object, error) {
	o := &Object{}
	switch t := v.(type) {
	case *v1alpha1.InferenceWorkerSet:
		o.Kind, o.WorkerSet = v1alpha1.KindInferenceWorkerSet, t
		o.Namespace, o.Name, o.Generation = t.Namespace, t.Name, t.Generation
	case *v1alpha1.InferencePool:
		o.Kind, o.Pool = v1alpha1.KindInferencePool, t
		o.Namespace, o.Name, o.Generation = t.Namespace, t.Name, t.Generation
	case *v1alpha1.InferenceProvider:
		o.Kind, o.Provider = v1alpha1.KindInferenceProvider, t
		o.Namespace, o.Name, o.Generation = t.Namespace, t.Name, t.Generation
	case *v1alpha1.InferencePolicy:
		o.Kind, o.Policy = v1alpha1.KindInferencePolicy, t
		o.Namespace, o.Name, o.Generation = t.Namespace, t.Name, t.Generation
	case *v1alpha1.GatewayBackend:
		o.Kind, o.Backend = v1alpha1.KindGatewayBackend, t
		o.Namespace, o.Name, o.Generation = t.Namespace, t.Name, t.Generation
	default:
		return nil, fmt.Errorf("not a switchyard.dev resource: %T", v)
	}
	return o, nil
}

// newTyped returns a new empty typed resource for kind, and sets it on o.
func (o *Object) newTyped() any {
	switch o.Kind {
	case v1alpha1.KindInferenceWorkerSet:
		o.WorkerSet = &v1alpha1.InferenceWorkerSet{}
		return o.WorkerSet
	case v1alpha1.KindInferencePool:
		o.Pool = &v1alpha1.InferencePool{}
		return o.Pool
	case v1alpha1.KindInferenceProvider:
		o.Provider = &v1alpha1.InferenceProvider{}
		return o.Provider
	case v1alpha1.KindInferencePolicy:
		o.Policy = &v1alpha1.InferencePolicy{}
		return o.Policy
	case v1alpha1.KindGatewayBackend:
		o.Backend = &v1alpha1.GatewayBackend{}
		return o.Backend
	}
	return nil
}

// position finds the position of path, or of its closest ancestor that has
// one (a defaulted field has none of its own).
func (o *Object) position(path string) Pos {
	if o.pos == nil {
		return Pos{}
	}
	for {
		if p, ok := o.pos[path]; ok {
			return p
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return o.start
		}
		path = path[:i]
	}
}

// diag builds a diagnostic about path in o.
func (o *Object) diag(sev Severity, path, format string, args ...any) Diagnostic {
	p := o.position(path)
	return Diagnostic{
		Severity:  sev,
		File:      o.File,
		Line:      p.Line,
		Column:    p.Column,
		Kind:      o.Kind,
		Namespace: o.Namespace,
		Name:      o.Name,
		Path:      path,
		Message:   fmt.Sprintf(format, args...),
	}
}
