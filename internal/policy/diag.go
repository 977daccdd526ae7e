package policy

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Severity of a diagnostic. Errors make a set of resources invalid;
// warnings are reported and compiled anyway.
type Severity uint8

// Severities.
const (
	SeverityError Severity = iota
	SeverityWarning
)

func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found in the resources, located by file, line
// and YAML path.
type Diagnostic struct {
	Severity Severity
	// File, Line and Column locate it; File is empty for resources read
	// from Kubernetes, Line 0 when unknown.
	File         string
	Line, Column int
	// Kind, Namespace and Name identify the resource; empty when the
	// problem is not in one resource (a YAML syntax error).
	Kind, Namespace, Name string
	// Path is the field, e.g. spec.rules[1].route.select[0].minimize.
	Path    string
	Message string
}

// String renders file:line:col: [warning: ]Kind ns/name: path: message.
func (d Diagnostic) String() string {
	var b strings.Builder
	if d.File != "" {
		b.WriteString(d.File)
		if d.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(d.Line))
			if d.Column > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(d.Column))
			}
		}
		b.WriteString(": ")
	}
	if d.Severity == SeverityWarning {
		b.WriteString("warning: ")
	}
	if d.Kind != "" {
		b.WriteString(d.Kind)
		b.WriteByte(' ')
		if d.Namespace != "" {
			b.WriteString(d.Namespace)
			b.WriteByte('/')
		}
		b.WriteString(d.Name)
		b.WriteString(": ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	return b.String()
}

// Diagnostics is a list of diagnostics.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Severity == SeverityError })
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics {
	return slices.DeleteFunc(slices.Clone(ds), func(d Diagnostic) bool { return d.Severity != SeverityError })
}

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics {
	return slices.DeleteFunc(slices.Clone(ds), func(d Diagnostic) bool { return d.Severity != SeverityWarning })
}

// For returns the diagnostics about one resource.
func (ds Diagnostics) For(kind, namespace, name string) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Kind == kind && d.Namespace == namespace && d.Name == name {
			out = append(out, d)
		}
	}
	return out
}

// Sort orders diagnostics by file, line, column, then message, so output
// is stable whatever order the checks ran in.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.Path, b.Path),
			cmp.Compare(a.Message, b.Message),
		)
	})
}

// Error renders every diagnostic, one per line.
func (ds Diagnostics) Error() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Err returns ds as an error when it holds errors, nil otherwise.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return ds.Errors()
}

// Summary renders at most n diagnostics on one line, for a status
// condition message.
func (ds Diagnostics) Summary(n int) string {
	var b strings.Builder
	for i, d := range ds {
		if i == n {
			fmt.Fprintf(&b, "; and %d more", len(ds)-n)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		if d.Path != "" {
			b.WriteString(d.Path)
			b.WriteString(": ")
		}
		b.WriteString(d.Message)
	}
	return b.String()
}
