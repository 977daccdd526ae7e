// Command yardctl is Switchyard's CLI. Online commands talk to a router's
// REST API; validate and explain -f check policies offline; tokenize shows
// the token ids a worker computes for a prompt or chat request.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-dev/switchyard/internal/flagenv"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage marks errors already explained to the user by the flag package.
var errUsage = errors.New("usage")

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"endpoints", "list the endpoints a router knows, with their live load and health", runEndpoints},
		{"usage", "a tenant's usage from the meter: requests, tokens cached and uncached, by model or time (table, json, csv)", runUsage},
		{"explain", "which target a request would get, and why: asks a router, or offline with -f POLICIES --state STATE.yaml", runExplainAny},
		{"validate", "validate policy and CRD files or directories (-f PATH...); every error listed", runValidate},
		{"keys", "make a tenant's API key (create) or the change revoking one (revoke); prints manifests, talks to nothing", runKeys},
		{"tokenize", "print the token ids a Hugging Face tokenizer gives a prompt or chat (stdin)", runTokenize},
		{"version", "print the version, commit and Go version", runVersion},
		{"completion", "print the bash, zsh or fish completion script: source <(yardctl completion bash); -h for zsh, fish", runCompletion},
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, "yardctl — Switchyard's CLI")
		fmt.Fprintln(stdout, "\nUsage: yardctl <command> [flags]   (yardctl <command> -h for its flags)\n\nCommands:")
		for _, c := range cmds {
			fmt.Fprintf(stdout, "  %-10s %s\n", c.name, c.summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdin, stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "yardctl %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "yardctl: unknown command %q (yardctl -h lists them)\n", args[0])
	return 2
}

// runExplainAny explains offline when policy files are given (-f), and
// asks a running router otherwise. Both modes parse one FlagSet, so that
// -h shows them both.
func runExplainAny(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs, ef := newExplainFlags(stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := ef.checkMode(fs); err != nil {
		return err
	}
	if len(ef.files) > 0 {
		return runExplainOffline(ef, stdin, stdout, stderr)
	}
	return runExplain(ctx, ef, stdin, stdout)
}

// routerFlags are shared by the commands that ask a router.
type routerFlags struct {
	routerURL string
	output    outputFormat
	httpFlags
}

func (r *routerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.routerURL, "router", "http://127.0.0.1:9091", "router REST base URL (its --http-addr)")
	r.httpFlags.register(fs, "router")
	r.output = outputTable
	fs.Var(&r.output, "o", "output `format`: table for people, json (the router's answer) for machines")
}

// httpFlags are how a command calls a service's REST API.
type httpFlags struct {
	// service names it in help and errors: "router", "meter".
	service string
	timeout time.Duration
	// tokenFile holds the service's operator token (its
	// --operator-token-file), sent as a bearer token; tls is for an
	// https:// URL.
	tokenFile string
	tls       lifecycle.GRPCClient
}

func (h *httpFlags) register(fs *flag.FlagSet, service string) {
	h.service = service
	fs.StringVar(&h.tokenFile, "token-file", "", "file holding the "+service+"'s operator token (its --operator-token-file), sent as a bearer token; env SWITCHYARD_TOKEN_FILE")
	fs.StringVar(&h.tls.CA, "tls-ca", "", "PEM CA verifying an https:// "+service+" (empty: the system's)")
	fs.StringVar(&h.tls.Cert, "tls-cert", "", "PEM client certificate for an https:// "+service+" that asks for one (with --tls-key)")
	fs.StringVar(&h.tls.Key, "tls-key", "", "PEM key of --tls-cert")
	fs.StringVar(&h.tls.ServerName, "tls-server-name", "", "name the "+service+"'s certificate must carry (default: the URL's host)")
	fs.DurationVar(&h.timeout, "timeout", 5*time.Second, "request timeout")
}

func parse(fs *flag.FlagSet, args []string) error {
	if probed(fs) { // completion reads the flags, nothing runs
		return flag.ErrHelp
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if err := flagenv.Apply(fs, nil); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

func runEndpoints(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl endpoints", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf routerFlags
	rf.register(fs)
	model := fs.String("model", "", "only endpoints serving this model")
	if err := parse(fs, args); err != nil {
		return err
	}
	u := strings.TrimRight(rf.routerURL, "/") + "/v1/endpoints"
	if *model != "" {
		u += "?model=" + url.QueryEscape(*model)
	}
	raw, err := rf.call(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	return show(stdout, rf.output, raw, &routerv1.ListEndpointsResponse{}, endpointsTable)
}

// runExplain asks a router. A --request body goes as the client would
// send it, with the tenant and tags as query parameters; without one, the
// request is a RouteRequest with no body.
func runExplain(ctx context.Context, ef *explainFlags, stdin io.Reader, stdout io.Writer) error {
	u := strings.TrimRight(ef.router.routerURL, "/") + "/v1/route:explain"
	var payload []byte
	if ef.request != "" {
		b, err := readInput(ef.request, stdin)
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		if payload, err = requestBody(b, ef.model); err != nil {
			return fmt.Errorf("request %s: %w", ef.request, err)
		}
		q := url.Values{}
		if ef.tenant != "" {
			q.Set("tenant", ef.tenant)
		}
		if ef.tags != "" {
			q.Set("tags", ef.tags)
		}
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
	} else {
		if ef.model == "" {
			return errors.New("--model is required without --request (a body naming its model)")
		}
		req := map[string]any{"model": ef.model, "api": "API_KIND_CHAT_COMPLETIONS"}
		if ef.tenant != "" {
			req["tenant"] = ef.tenant
		}
		if ef.tags != "" {
			req["tags"] = strings.Split(ef.tags, ",")
		}
		var err error
		if payload, err = json.Marshal(req); err != nil {
			return err
		}
	}
	raw, err := ef.router.call(ctx, http.MethodPost, u, payload)
	if err != nil {
		return err
	}
	return show(stdout, ef.router.output, raw, &routerv1.ExplainResponse{}, explainTable)
}

// requestBody is the body explain sends for a --request file: a chat or
// completions body as it is, or with model, when given, in place of the
// body's own. The router reads the request's fields, not its bytes, so
// re-encoding it for a new model explains the same prompt.
func requestBody(b []byte, model string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	_, chat := top["messages"]
	_, completions := top["prompt"]
	if !chat && !completions {
		return nil, errors.New(`neither "messages" (chat completions) nor "prompt" (completions): not a request body`)
	}
	if model == "" {
		if _, ok := top["model"]; !ok {
			return nil, errors.New("the body names no model: give --model")
		}
		return b, nil
	}
	top["model"], _ = json.Marshal(model)
	return json.Marshal(top)
}

// call does one REST call and returns the JSON answer; an error status
// becomes an error with the service's message.
func (r *httpFlags) call(ctx context.Context, method, u string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.tokenFile != "" {
		tok, err := lifecycle.ReadToken(r.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	client := http.DefaultClient
	if r.tls.Secure() {
		tc, err := r.tls.TLSConfig("")
		if err != nil {
			return nil, err
		}
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		msg := errorMessage(raw)
		if resp.StatusCode == http.StatusUnauthorized && r.tokenFile == "" {
			msg += " (give the " + r.service + "'s operator token with --token-file)"
		}
		return nil, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, msg)
	}
	return raw, nil
}

// errorMessage is the message of a router error, {"code":3,"message":...},
// or a meter's, {"error":{"message":...}}, or the answer as it is when it
// is neither.
func errorMessage(raw []byte) string {
	var st struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &st) == nil && st.Message != "" {
		return st.Message
	}
	if st.Error.Message != "" {
		return st.Error.Message
	}
	return strings.TrimSpace(string(raw))
}
