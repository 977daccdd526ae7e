package harmony

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/tokenizer/chattemplate"
)

// The function tools' parameters are JSON schemas that harmony writes as
// TypeScript-like types (openai/harmony src/encoding.rs,
// json_schema_to_typescript). What follows is that function's logic, case
// for case, over the values chattemplate.ParseJSON returns; the schema has
// reached it through Python (the request's JSON), json.dumps and serde_json
// with preserve_order, so keys keep the request's order.

// errSchemaValue is a schema value whose text on the worker the router
// cannot reproduce for sure.
var errSchemaValue = errors.New("unsupported value")

func get(v any, key string) (any, bool) {
	d, ok := v.(*chattemplate.Dict)
	if !ok {
		return nil, false
	}
	return d.Get(key)
}

func getString(v any, key string) (string, bool) {
	x, _ := get(v, key)
	s, ok := x.(string)
	return s, ok
}

func getArray(v any, key string) ([]any, bool) {
	x, _ := get(v, key)
	a, ok := x.([]any)
	return a, ok
}

func getBool(v any, key string) bool {
	x, _ := get(v, key)
	b, _ := x.(bool)
	return b
}

func isEnum(schema any) bool {
	a, ok := getArray(schema, "enum")
	return ok && len(a) > 0
}

func nullable(schema any, typ string) string {
	if getBool(schema, "nullable") && !strings.Contains(typ, "null") {
		return typ + " | null"
	}
	return typ
}

// defaultComment is a schema's default as harmony writes it after
// "default: ": a string in quotes (unescaped), or bare for an enum where
// enumBare (everywhere but a top-level oneOf's variants, which print it as
// JSON), any other value as serde_json prints it.
func defaultComment(schema, def any, enumBare bool) (string, error) {
	if s, ok := def.(string); ok {
		if !isEnum(schema) {
			return `"` + s + `"`, nil
		}
		if enumBare {
			return s, nil
		}
	}
	return serdeJSON(def)
}

// typeScript is json_schema_to_typescript(schema, indent).
func typeScript(schema any, indent string) (string, error) {
	if oneOf, ok := getArray(schema, "oneOf"); ok {
		var b strings.Builder
		for _, variant := range oneOf {
			b.WriteString("\n" + indent + " | ")
			t, err := typeScript(variant, indent+"   ")
			if err != nil {
				return "", err
			}
			b.WriteString(nullable(variant, t))
			var comments []string
			if desc, ok := getString(variant, "description"); ok {
				comments = append(comments, desc)
			}
			if def, ok := get(variant, "default"); ok {
				c, err := defaultComment(variant, def, false)
				if err != nil {
					return "", err
				}
				comments = append(comments, "default: "+c)
			}
			if len(comments) > 0 {
				b.WriteString(" // " + strings.Join(comments, " "))
			}
		}
		return b.String(), nil
	}
	if types, ok := getArray(schema, "type"); ok {
		var names []string
		for _, t := range types {
			if s, ok := t.(string); ok {
				if s == "integer" {
					s = "number"
				}
				names = append(names, s)
			}
		}
		if len(names) > 0 {
			return strings.Join(names, " | "), nil
		}
	}
	typ, ok := getString(schema, "type")
	if !ok {
		return "any", nil
	}
	switch typ {
	case "object":
		return objectType(schema, indent)
	case "string":
		if values, ok := getArray(schema, "enum"); ok {
			var quoted []string
			for _, v := range values {
				if s, ok := v.(string); ok {
					quoted = append(quoted, `"`+s+`"`)
				}
			}
			if len(quoted) > 0 {
				return strings.Join(quoted, " | "), nil
			}
		}
		return "string", nil
	case "number", "integer":
		return "number", nil
	case "boolean":
		return "boolean", nil
	case "array":
		if items, ok := get(schema, "items"); ok {
			t, err := typeScript(items, indent)
			return t + "[]", err
		}
		return "Array<any>", nil
	}
	return "any", nil
}

func objectType(schema any, indent string) (string, error) {
	var b strings.Builder
	if desc, ok := getString(schema, "description"); ok {
		b.WriteString(indent + "// " + desc + "\n")
	}
	b.WriteString("{\n")
	propsV, _ := get(schema, "properties")
	props, _ := propsV.(*chattemplate.Dict)
	if props != nil {
		required := map[string]bool{}
		if req, ok := getArray(schema, "required"); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		for _, k := range props.Keys() {
			key, _ := k.(string)
			val, _ := props.Get(k)
			optional := "?"
			if required[key] {
				optional = ""
			}
			if title, ok := getString(val, "title"); ok {
				b.WriteString(indent + "// " + title + "\n" + indent + "//\n")
			}
			// A oneOf that is not an array renders as a plain property,
			// but still without the description or default comments.
			_, hasOneOf := get(val, "oneOf")
			oneOf, isOneOf := getArray(val, "oneOf")
			if !hasOneOf {
				if desc, ok := getString(val, "description"); ok {
					b.WriteString(indent + "// " + desc + "\n")
				}
			}
			if examples, ok := getArray(val, "examples"); ok && len(examples) > 0 {
				b.WriteString(indent + "// Examples:\n")
				for _, ex := range examples {
					if s, ok := ex.(string); ok {
						b.WriteString(indent + `// - "` + s + "\"\n")
					}
				}
			}
			if isOneOf {
				if err := oneOfProperty(&b, val, oneOf, key+optional, indent); err != nil {
					return "", err
				}
				continue
			}
			b.WriteString(indent + key + optional + ": ")
			t, err := typeScript(val, indent+"    ")
			if err != nil {
				return "", err
			}
			b.WriteString(nullable(val, t) + ",")
			if def, ok := get(val, "default"); ok && !hasOneOf {
				c, err := defaultComment(val, def, true)
				if err != nil {
					return "", err
				}
				b.WriteString(" // default: " + c)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString(indent + "}")
	return b.String(), nil
}

// oneOfProperty writes a property whose schema is a oneOf: its comments
// above it, then one line per variant.
func oneOfProperty(b *strings.Builder, val any, variants []any, name, indent string) error {
	propDesc, hasPropDesc := getString(val, "description")
	skipPropDesc := false
	if hasPropDesc && len(variants) > 0 {
		if d, ok := getString(variants[0], "description"); ok && d == propDesc {
			skipPropDesc = true
		}
	}
	descAbove := false
	if hasPropDesc && !skipPropDesc {
		b.WriteString(indent + "// " + propDesc + "\n")
		descAbove = true
	}
	if def, ok := get(val, "default"); ok {
		c, err := defaultComment(val, def, true)
		if err != nil {
			return err
		}
		b.WriteString(indent + "// default: " + c + "\n")
	}
	b.WriteString(indent + name + ":\n")
	for i, variant := range variants {
		b.WriteString(indent + " | ")
		t, err := typeScript(variant, indent+"   ")
		if err != nil {
			return err
		}
		b.WriteString(nullable(variant, t))
		var comments []string
		if !(i == 0 && descAbove) {
			if d, ok := getString(variant, "description"); ok && (!hasPropDesc || d != propDesc) {
				comments = append(comments, d)
			}
		}
		if def, ok := get(variant, "default"); ok {
			c, err := defaultComment(variant, def, true)
			if err != nil {
				return err
			}
			comments = append(comments, "default: "+c)
		}
		if len(comments) > 0 {
			b.WriteString(" // " + strings.Join(comments, " "))
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + ",\n")
	return nil
}

// serdeJSON is v as serde_json's Display prints it: compact, keys in
// order, strings escaped as serde escapes them.
func serdeJSON(v any) (string, error) {
	var b strings.Builder
	if err := writeSerde(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeSerde(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		s, err := serdeFloat(x)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case string:
		writeSerdeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeSerde(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *chattemplate.Dict:
		b.WriteByte('{')
		for i, k := range x.Keys() {
			if i > 0 {
				b.WriteByte(',')
			}
			ks, _ := k.(string)
			writeSerdeString(b, ks)
			b.WriteByte(':')
			e, _ := x.Get(k)
			if err := writeSerde(b, e); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("%w %T", errSchemaValue, v)
	}
	return nil
}

// serdeFloat prints a float as serde_json does (ryu's shortest digits,
// with ".0" on whole numbers), for magnitudes where that is plain decimal
// notation for sure; the exponent forms at the extremes (and integers
// beyond int64, which reach here as floats but are integers in Python) are
// refused.
func serdeFloat(f float64) (string, error) {
	if a := math.Abs(f); a != 0 && (a < 1e-4 || a >= 1e15) || math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("%w: the number %v", errSchemaValue, f)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s, nil
}

func writeSerdeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
