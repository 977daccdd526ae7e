package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/policy"
)

// maxRequestFile bounds the request file read by explain.
const maxRequestFile = 64 << 20

// offlineRequest is what explain reads from --request: an OpenAI (or
// Anthropic) request body, whose model is used, optionally with the
// routing context a gateway would add.
type offlineRequest struct {
	Model  string   `json:"model"`
	Tenant string   `json:"tenant"`
	Tags   []string `json:"tags"`
}

// runExplainOffline is `yardctl explain -f PATH... --state STATE.yaml
// --request REQ.json`: which target the request would get from these
// resources in that state, and why, with no cluster and no router.
func runExplainOffline(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files fileFlag
	fs.Var(&files, "f", "YAML file or directory of Switchyard resources (repeatable, comma-separated)")
	stateFile := fs.String("state", "", "YAML file with the backends' load and cache state (optional: idle)")
	reqFile := fs.String("request", "", "JSON request body: model, and optionally tenant and tags ('-' for stdin)")
	model := fs.String("model", "", "requested model (overrides the request's)")
	tenant := fs.String("tenant", "", "tenant (overrides the request's)")
	tags := fs.String("tags", "", "comma-separated tags, added to the request's and the tenant's defaults")
	backend := fs.String("gateway-backend", "", "GatewayBackend whose policies apply (default: the only or first one)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: yardctl explain -f PATH [-f PATH...] --request REQ.json [--state STATE.yaml]\n\nEvaluates the policies offline and prints the chosen target and the decision trace.")
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "yardctl explain: -f is required for offline explain")
		fs.Usage()
		return errUsage
	}
	snap, diags, err := policy.Load(files...)
	if err != nil {
		return err
	}
	if snap == nil {
		for _, d := range diags {
			fmt.Fprintln(stderr, d.String())
		}
		return fmt.Errorf("the resources are invalid (%s)", plural(len(diags.Errors()), "error"))
	}
	var req offlineRequest
	if *reqFile != "" {
		b, err := readInput(*reqFile, stdin)
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return fmt.Errorf("parse request %s: %w", *reqFile, err)
		}
	}
	if *model != "" {
		req.Model = *model
	}
	if *tenant != "" {
		req.Tenant = *tenant
	}
	if req.Model == "" {
		return errors.New("no model: give --request with a model field, or --model")
	}
	var st *policy.State
	if *stateFile != "" {
		b, err := readInput(*stateFile, stdin)
		if err != nil {
			return fmt.Errorf("read state: %w", err)
		}
		if st, err = policy.ParseState(b); err != nil {
			return fmt.Errorf("%s: %w", *stateFile, err)
		}
	}
	prog := snap.Program(*backend)
	if prog == nil {
		return fmt.Errorf("no GatewayBackend %q in the resources", *backend)
	}
	// Tags as the gateway would build them: the request's, the flag's, then
	// the tenant's defaults.
	var all []string
	add := func(ts ...string) {
		for _, t := range ts {
			if t = strings.TrimSpace(t); t != "" && !slices.Contains(all, t) {
				all = append(all, t)
			}
		}
	}
	add(req.Tags...)
	if *tags != "" {
		add(strings.Split(*tags, ",")...)
	}
	add(prog.TenantTags(req.Tenant)...)
	bs, err := snap.Backends(st)
	if err != nil {
		return err
	}
	r := policy.Request{Model: req.Model, Tenant: req.Tenant, Tags: all}
	var d policy.Decision
	prog.Evaluate(&r, bs, &d)
	if prog.Name != "" {
		fmt.Fprintf(stdout, "gateway:  %s\n", prog.Name)
	}
	return d.Explain(stdout, &r, bs)
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxRequestFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxRequestFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxRequestFile)
	}
	return b, nil
}
