package main

import (
	"encoding/json"
	"errors"
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
func runExplainOffline(ef *explainFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	snap, diags, err := policy.Load(ef.files...)
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
	if ef.request != "" {
		b, err := readInput(ef.request, stdin)
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		if err := json.Unmarshal(b, &req); err != nil {
			return fmt.Errorf("parse request %s: %w", ef.request, err)
		}
	}
	if ef.model != "" {
		req.Model = ef.model
	}
	if ef.tenant != "" {
		req.Tenant = ef.tenant
	}
	if req.Model == "" {
		return errors.New("no model: give --request with a model field, or --model")
	}
	var st *policy.State
	if ef.state != "" {
		b, err := readInput(ef.state, stdin)
		if err != nil {
			return fmt.Errorf("read state: %w", err)
		}
		if st, err = policy.ParseState(b); err != nil {
			return fmt.Errorf("%s: %w", ef.state, err)
		}
	}
	prog := snap.Program(ef.backend)
	if prog == nil {
		return fmt.Errorf("no GatewayBackend %q in the resources", ef.backend)
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
	if ef.tags != "" {
		add(strings.Split(ef.tags, ",")...)
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
