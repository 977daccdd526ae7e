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
		{"explain", "which target a request would get, and why: asks a router, or offline with -f POLICIES --state STATE.yaml", runExplainAny},
		{"validate", "validate policy and CRD files or directories (-f PATH...); every error listed", runValidate},
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
// asks a running router otherwise.
func runExplainAny(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	for _, a := range args {
		if a == "-f" || a == "--f" || strings.HasPrefix(a, "-f=") || strings.HasPrefix(a, "--f=") {
			return runExplainOffline(ctx, args, stdin, stdout, stderr)
		}
	}
	return runExplain(ctx, args, stdin, stdout, stderr)
}

// routerFlags are shared by the online commands.
type routerFlags struct {
	routerURL string
	timeout   time.Duration
}

func (r *routerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.routerURL, "router", "http://127.0.0.1:9091", "router REST base URL (its --http-addr)")
	fs.DurationVar(&r.timeout, "timeout", 5*time.Second, "request timeout")
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
	return call(ctx, rf.timeout, http.MethodGet, u, nil, stdout)
}

func runExplain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yardctl explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf routerFlags
	rf.register(fs)
	model := fs.String("model", "", "requested model (required)")
	tenant := fs.String("tenant", "", "tenant")
	bodyFile := fs.String("request", "", "file with the OpenAI request body to explain ('-' for stdin)")
	tags := fs.String("tags", "", "comma-separated request tags")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return fmt.Errorf("--model is required")
	}
	req := map[string]any{"model": *model, "api": "API_KIND_CHAT_COMPLETIONS"}
	if *tenant != "" {
		req["tenant"] = *tenant
	}
	if *tags != "" {
		req["tags"] = strings.Split(*tags, ",")
	}
	if *bodyFile != "" {
		var b []byte
		var err error
		if *bodyFile == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(*bodyFile)
		}
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		req["body"] = b // bytes fields are base64 in the proto JSON mapping
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return call(ctx, rf.timeout, http.MethodPost, strings.TrimRight(rf.routerURL, "/")+"/v1/route:explain", payload, stdout)
}

// call does one REST call and pretty-prints the JSON answer.
func call(ctx context.Context, timeout time.Duration, method, u string, body []byte, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, raw, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(raw)
	}
	pretty.WriteByte('\n')
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, strings.TrimSpace(pretty.String()))
	}
	_, err = out.Write(pretty.Bytes())
	return err
}
