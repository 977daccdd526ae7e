package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v3"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

// Limits on one YAML input, so a hostile or broken file cannot exhaust
// memory: the size, nesting depth, and nodes visited (aliases expand).
const (
	maxFileBytes  = 4 << 20
	maxDepth      = 64
	maxNodeVisits = 200_000
)

// ParseYAML reads every Switchyard resource in a YAML stream (documents
// separated by ---). Documents of other API groups (a Kustomization, a
// Secret) are skipped; empty documents too. The diagnostics returned are
// those outside any resource (syntax errors, unknown kinds); a resource's
// own decode errors stay with it and are reported by Compile, which still
// resolves references to it so one typo does not cascade.
func ParseYAML(file string, data []byte) ([]*Object, Diagnostics) {
	if len(data) > maxFileBytes {
		return nil, Diagnostics{{File: file, Message: fmt.Sprintf("file larger than %d bytes", maxFileBytes)}}
	}
	var objs []*Object
	var diags Diagnostics
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			diags = append(diags, yamlError(file, err))
			break // the decoder cannot resynchronise after a syntax error
		}
		if len(doc.Content) == 0 {
			continue
		}
		obj, ds := decodeDocument(file, doc.Content[0])
		diags = append(diags, ds...)
		if obj != nil {
			objs = append(objs, obj)
		}
	}
	return objs, diags
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// yamlError turns a yaml.v3 syntax error into a diagnostic with its line.
func yamlError(file string, err error) Diagnostic {
	msg := err.Error()
	d := Diagnostic{File: file}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if m[1] != "" {
			d.Line, _ = strconv.Atoi(m[1])
		}
		msg = msg[len(m[0]):]
	}
	d.Message = "invalid YAML: " + msg
	return d
}

// decodeDocument decodes one document. It returns nil when the document
// is not a Switchyard resource.
func decodeDocument(file string, root *yaml.Node) (*Object, Diagnostics) {
	if root.Kind == yaml.AliasNode {
		root = root.Alias
	}
	start := Pos{root.Line, root.Column}
	at := func(n *yaml.Node, path, format string, args ...any) Diagnostic {
		return Diagnostic{File: file, Line: n.Line, Column: n.Column, Path: path, Message: fmt.Sprintf(format, args...)}
	}
	if root.Kind != yaml.MappingNode {
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			return nil, nil
		}
		return nil, Diagnostics{at(root, "", "a resource must be a mapping, got %s", nodeKind(root))}
	}
	apiVersion, avNode := scalarField(root, "apiVersion")
	kind, kindNode := scalarField(root, "kind")
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	if group != v1alpha1.Group {
		// Not ours (a Kustomization, a CRD, a Secret): skip it quietly,
		// unless the kind says it was meant to be ours.
		if slices.Contains(v1alpha1.Kinds, kind) {
			n := avNode
			if n == nil {
				n = root
			}
			return nil, Diagnostics{at(n, "apiVersion", "%s needs apiVersion %s, got %q", kind, v1alpha1.APIVersion, apiVersion)}
		}
		return nil, nil
	}
	if apiVersion != v1alpha1.APIVersion {
		return nil, Diagnostics{at(avNode, "apiVersion", "unknown version %q (want %s)", apiVersion, v1alpha1.APIVersion)}
	}
	if !slices.Contains(v1alpha1.Kinds, kind) {
		n := kindNode
		if n == nil {
			return nil, Diagnostics{at(root, "kind", "kind is missing")}
		}
		return nil, Diagnostics{at(n, "kind", "unknown kind %q%s", kind, didYouMean(kind, v1alpha1.Kinds))}
	}
	obj := &Object{Kind: kind, File: file, pos: map[string]Pos{}, start: start}
	d := &decoder{obj: obj}
	d.value(root, "", reflect.ValueOf(obj.newTyped()).Elem(), 0)
	meta := reflect.ValueOf(obj.typed()).Elem().FieldByName("ObjectMeta")
	obj.Name = meta.FieldByName("Name").String()
	obj.Namespace = meta.FieldByName("Namespace").String()
	obj.Generation = meta.FieldByName("Generation").Int()
	// Decode errors name the resource once its name is known. They stay
	// with the object and come out of Compile, which also reports the
	// object's other problems.
	for i := range d.diags {
		d.diags[i].Kind, d.diags[i].Namespace, d.diags[i].Name = obj.Kind, obj.Namespace, obj.Name
	}
	obj.decodeDiags = d.diags
	obj.broken = len(d.diags) > 0
	return obj, nil
}

// typed returns o's typed resource.
func (o *Object) typed() any {
	switch {
	case o.WorkerSet != nil:
		return o.WorkerSet
	case o.Pool != nil:
		return o.Pool
	case o.Provider != nil:
		return o.Provider
	case o.Policy != nil:
		return o.Policy
	case o.Backend != nil:
		return o.Backend
	}
	return nil
}

// scalarField returns the scalar value of key in mapping n.
func scalarField(n *yaml.Node, key string) (string, *yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.ScalarNode {
				return v.Value, v
			}
			return "", v
		}
	}
	return "", nil
}

// decoder fills typed resources from YAML nodes, following the json tags
// of the API types, and reports every problem with its path and line.
type decoder struct {
	obj    *Object
	diags  Diagnostics
	visits int
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{
		File: d.obj.File, Line: n.Line, Column: n.Column, Path: path,
		Message: fmt.Sprintf(format, args...),
	})
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

func (d *decoder) value(n *yaml.Node, path string, v reflect.Value, depth int) {
	d.visits++
	if d.visits > maxNodeVisits {
		if d.visits == maxNodeVisits+1 {
			d.errorf(n, path, "document too large (more than %d nodes after alias expansion)", maxNodeVisits)
		}
		return
	}
	if depth > maxDepth {
		d.errorf(n, path, "nested deeper than %d levels", maxDepth)
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.errorf(n, path, "unknown alias")
			return
		}
		n = n.Alias
	}
	if path != "" {
		if _, seen := d.obj.pos[path]; !seen {
			d.obj.pos[path] = Pos{n.Line, n.Column}
		}
	}
	isNull := n.Kind == yaml.ScalarNode && n.Tag == "!!null"
	if v.Kind() == reflect.Pointer {
		if isNull {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, path, v.Elem(), depth+1)
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(jsonUnmarshaler) && v.Kind() == reflect.Struct {
		// metav1.Time, metav1.Duration, FieldsV1: let them parse themselves.
		var raw any
		if err := n.Decode(&raw); err != nil {
			d.errorf(n, path, "%v", cleanYAMLErr(err))
			return
		}
		b, err := json.Marshal(jsonCompatible(raw))
		if err != nil {
			d.errorf(n, path, "%v", err)
			return
		}
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b); err != nil {
			d.errorf(n, path, "invalid value %s: %v", strings.TrimSpace(string(b)), err)
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.structValue(n, path, v, depth)
	case reflect.Slice:
		if isNull {
			v.SetZero()
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, got %s", nodeKind(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.value(c, path+"["+strconv.Itoa(i)+"]", s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		if isNull {
			v.SetZero()
			return
		}
		if n.Kind != yaml.MappingNode || v.Type().Key().Kind() != reflect.String {
			d.errorf(n, path, "expected a mapping, got %s", nodeKind(n))
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				d.errorf(k, path, "keys must be strings, got %s", nodeKind(k))
				continue
			}
			key := reflect.New(v.Type().Key()).Elem()
			key.SetString(k.Value)
			if m.MapIndex(key).IsValid() {
				d.errorf(k, path, "key %q given twice", k.Value)
				continue
			}
			val := reflect.New(v.Type().Elem()).Elem()
			d.value(n.Content[i+1], path+"."+k.Value, val, depth+1)
			m.SetMapIndex(key, val)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			d.errorf(n, path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.errorf(n, path, "expected an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(i) {
			d.errorf(n, path, "%d is out of range", i)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.errorf(n, path, "expected a number, got %s", describe(n))
			return
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.errorf(n, path, "expected a finite number, got %s", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		var raw any
		if err := n.Decode(&raw); err != nil {
			d.errorf(n, path, "%v", cleanYAMLErr(err))
			return
		}
		v.Set(reflect.ValueOf(jsonCompatible(raw)))
	default:
		d.errorf(n, path, "unsupported field type %s", v.Type())
	}
}

func (d *decoder) structValue(n *yaml.Node, path string, v reflect.Value, depth int) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		v.SetZero()
		return
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be strings, got %s", nodeKind(k))
			continue
		}
		if k.Value == "<<" {
			d.errorf(k, path, "YAML merge keys (<<) are not supported")
			continue
		}
		child := k.Value
		if path != "" {
			child = path + "." + k.Value
		}
		if seen[k.Value] {
			d.errorf(k, child, "field given twice")
			continue
		}
		seen[k.Value] = true
		f, ok := fields.byName[k.Value]
		if !ok {
			d.errorf(k, child, "unknown field %q%s", k.Value, didYouMean(k.Value, fields.names))
			continue
		}
		d.value(val, child, v.FieldByIndex(f), depth+1)
	}
}

// structFields is a struct type's JSON field names and their indexes,
// inline embedded structs (TypeMeta) flattened.
type structFields struct {
	byName map[string][]int
	names  []string
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string][]int{}}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if f.Anonymous && name == "" && (opts == "inline" || strings.Contains(opts, "inline") || tag == "") && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := sf.byName[name]; !dup {
				sf.byName[name] = idx
				sf.names = append(sf.names, name)
			}
		}
	}
	walk(t, nil)
	slices.Sort(sf.names)
	fieldCache.Store(t, sf)
	return sf
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	return "nothing"
}

// describe renders a node for "expected X, got Y".
func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return nodeKind(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	switch n.Tag {
	case "!!str":
		return "string " + strconv.Quote(v)
	case "!!int":
		return "integer " + v
	case "!!float":
		return "number " + v
	case "!!bool":
		return "boolean " + v
	case "!!null":
		return "null"
	}
	return strings.TrimPrefix(n.Tag, "!!") + " " + strconv.Quote(v)
}

func cleanYAMLErr(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// jsonCompatible converts yaml.v3's map[string]any / map[any]any trees to
// JSON-marshalable values.
func jsonCompatible(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = jsonCompatible(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonCompatible(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = jsonCompatible(e)
		}
		return t
	}
	return v
}
