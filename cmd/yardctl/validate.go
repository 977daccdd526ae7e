package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/policy"
)

// fileFlag collects -f values: repeatable, each possibly comma-separated.
type fileFlag []string

func (f *fileFlag) String() string { return strings.Join(*f, ",") }

func (f *fileFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*f = append(*f, p)
		}
	}
	return nil
}

// runValidate is `yardctl validate -f PATH...`: parse, check and compile
// the resources offline; every problem is listed, and the exit status is
// non-zero when any is an error.
func runValidate(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileFlag
	fs.Var(&files, "f", "YAML file or directory of Switchyard resources (repeatable, comma-separated)")
	strict := fs.Bool("strict", false, "treat warnings as errors")
	quiet := fs.Bool("q", false, "print only problems")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: yardctl validate -f PATH [-f PATH...] [-strict]\n\nChecks InferencePolicy, InferenceProvider, InferenceWorkerSet, InferencePool and\nGatewayBackend resources offline: syntax, fields, values and the references between them.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "yardctl validate: -f is required")
		fs.Usage()
		return errUsage
	}
	objs, diags, err := policy.LoadPaths(files...)
	if err != nil {
		return err
	}
	// The Secrets tenants name (keysSecret) are in the cluster, not in
	// these files: their names are checked, not their content.
	policy.AssumeKeySecrets(objs)
	_, d := policy.Compile(objs)
	diags = append(diags, d...)
	diags.Sort()
	errs, warns := diags.Errors(), diags.Warnings()
	for _, d := range diags {
		fmt.Fprintln(stdout, d.String())
	}
	if len(errs) > 0 || (*strict && len(warns) > 0) {
		return fmt.Errorf("%s, %s", plural(len(errs), "error"), plural(len(warns), "warning"))
	}
	if len(objs) == 0 {
		return errors.New("no Switchyard resources found")
	}
	if !*quiet {
		fmt.Fprintf(stdout, "valid: %s (%s)", plural(len(objs), "resource"), countKinds(objs))
		if len(warns) > 0 {
			fmt.Fprintf(stdout, ", %s", plural(len(warns), "warning"))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func countKinds(objs []*policy.Object) string {
	counts := map[string]int{}
	for _, o := range objs {
		counts[o.Kind]++
	}
	var parts []string
	for _, k := range v1alpha1.Kinds {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}
