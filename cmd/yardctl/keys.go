package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/switchyard-dev/switchyard/internal/apikey"
)

// newKey makes keys; tests replace it to get stable output.
var newKey = apikey.Generate

var (
	tenantNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	secretNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	digestRE     = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// keysFlags are the flags of `yardctl keys create|revoke`; one FlagSet for
// both, so completion and -h show them all.
type keysFlags struct {
	tenant, secret, namespace, output, digest string
	keyStdin                                  bool
}

// runKeys is `yardctl keys create|revoke`: it makes an API key, or the
// change that revokes one. It talks to nothing: what it prints is applied
// with kubectl (or pasted into the files policyd reads), so keys are
// managed like any other configuration, reviewed and in version control,
// and only digests are ever stored.
func runKeys(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	action := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		action, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("yardctl keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var kf keysFlags
	fs.StringVar(&kf.tenant, "tenant", "", "the tenant the key belongs to (required)")
	fs.StringVar(&kf.secret, "secret-name", "", "the Secret holding the tenant's key digests, named by its GatewayBackend entry's keysSecret (empty: TENANT-keys)")
	fs.StringVar(&kf.namespace, "namespace", "", "the GatewayBackend's namespace, where the Secret must be (empty: kubectl's current namespace)")
	fs.StringVar(&kf.output, "o", "yaml", "yaml: a Kubernetes Secret (create) or merge patch (revoke); files: the GatewayBackend tenants entry for files mode")
	fs.StringVar(&kf.digest, "digest", "", "revoke: the digest of the key to revoke (sha256:..., as create printed it)")
	fs.BoolVar(&kf.keyStdin, "key-stdin", false, "revoke: read the key itself from stdin instead of --digest (a key never goes in a flag: shell history keeps it)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, `Usage: yardctl keys create --tenant NAME [--secret-name S] [--namespace NS] [-o yaml|files]
       yardctl keys revoke --tenant NAME (--digest sha256:... | --key-stdin) [--secret-name S] [--namespace NS] [-o yaml|files]

create makes a new API key for a tenant. The key is printed once, on stderr: store it now,
Switchyard keeps only its SHA-256 digest. Stdout is what holds the digest: a Secret manifest
to kubectl apply (with a kubectl patch on stderr to add the key to an existing Secret), or
with -o files the tenants entry of a GatewayBackend read by policyd in files mode.

revoke prints the change that removes a key: a merge patch deleting its entry from the
tenant's Secret (kubectl patch secret S --type merge --patch-file FILE), or with -o files the
line to delete from the tenant's keyDigests. policyd serves the change within seconds and the
gateways refuse the key from then on.`)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	var problems []string
	switch {
	case action != "create" && action != "revoke":
		fs.Usage()
		if action == "" {
			return errUsage
		}
		return fmt.Errorf("unknown action %q: want create or revoke", action)
	case kf.tenant == "":
		problems = append(problems, "--tenant is required")
	case len(kf.tenant) > 63 || !tenantNameRE.MatchString(kf.tenant):
		problems = append(problems, fmt.Sprintf("--tenant %q is not a valid tenant name (1-63 lowercase letters, digits, '.', '_' and '-')", kf.tenant))
	}
	if kf.secret == "" && kf.tenant != "" {
		kf.secret = strings.ReplaceAll(kf.tenant, "_", "-") + "-keys"
	}
	if kf.secret != "" && (len(kf.secret) > 253 || !secretNameRE.MatchString(kf.secret)) {
		problems = append(problems, fmt.Sprintf("--secret-name %q is not a valid Secret name", kf.secret))
	}
	if kf.namespace != "" && !secretNameRE.MatchString(kf.namespace) {
		problems = append(problems, fmt.Sprintf("--namespace %q is not a valid namespace", kf.namespace))
	}
	if kf.output != "yaml" && kf.output != "files" {
		problems = append(problems, fmt.Sprintf("-o %q: want yaml or files", kf.output))
	}
	if action == "create" && (kf.digest != "" || kf.keyStdin) {
		problems = append(problems, "--digest and --key-stdin are for revoke")
	}
	if action == "revoke" {
		switch {
		case kf.digest != "" && kf.keyStdin:
			problems = append(problems, "give --digest or --key-stdin, not both")
		case kf.keyStdin:
			key, err := readKeyLine(stdin)
			if err != nil {
				problems = append(problems, err.Error())
			}
			kf.digest = apikey.Digest(key)
		case kf.digest == "":
			problems = append(problems, "give the key to revoke: --digest sha256:... or --key-stdin")
		case strings.HasPrefix(kf.digest, apikey.Prefix):
			problems = append(problems, "--digest got a key, not its digest: pipe the key to --key-stdin instead, and treat it as leaked (shell history)")
		case !digestRE.MatchString(kf.digest):
			problems = append(problems, "--digest: want sha256: and 64 lowercase hex digits")
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	if action == "create" {
		return keysCreate(kf, stdout, stderr)
	}
	return keysRevoke(kf, stdout, stderr)
}

// readKeyLine reads one key from stdin, bounded.
func readKeyLine(stdin io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(stdin, 1024)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the key from stdin: %w", err)
	}
	key := strings.TrimSpace(line)
	if !apikey.WellFormed(key) {
		return "", errors.New("stdin does not hold a Switchyard key (sy-...)")
	}
	return key, nil
}

// secretEntry is the data key a digest is stored under: derived from the
// digest, so revoke finds it from the digest alone.
func secretEntry(digest string) string {
	return "key-" + strings.TrimPrefix(digest, "sha256:")[:16]
}

func keysCreate(kf keysFlags, stdout, stderr io.Writer) error {
	key := newKey()
	digest := apikey.Digest(key)
	fmt.Fprintf(stderr, "API key of tenant %s (shown once; Switchyard keeps only its digest):\n\n    %s\n\n", kf.tenant, key)
	if kf.output == "files" {
		fmt.Fprintf(stdout, `# GatewayBackend spec for files mode: add the tenant (or the digest to its
# keyDigests) and set auth.mode: APIKey; policyd reloads the file.
auth:
  mode: APIKey
tenants:
- name: %s
  keyDigests:
  - %s
`, kf.tenant, digest)
		return nil
	}
	ns, nsFlag := "", ""
	if kf.namespace != "" {
		ns, nsFlag = "\n  namespace: "+kf.namespace, " -n "+kf.namespace
	}
	fmt.Fprintf(stderr, "To add it to an existing Secret instead of applying the manifest (which would replace its keys):\n    kubectl patch secret %s%s --type merge -p '{\"stringData\":{\"%s\":\"%s\"}}'\n",
		kf.secret, nsFlag, secretEntry(digest), digest)
	fmt.Fprintf(stdout, `# The key digests of tenant %[1]s. Apply it, and name it in the GatewayBackend
# (auth.mode: APIKey): tenants: [{name: %[1]s, keysSecret: %[2]s}]
apiVersion: v1
kind: Secret
metadata:
  name: %[2]s%[3]s
  labels:
    switchyard.dev/tenant: %[1]s
type: Opaque
stringData:
  %[4]s: %[5]s
`, kf.tenant, kf.secret, ns, secretEntry(digest), digest)
	return nil
}

func keysRevoke(kf keysFlags, stdout, stderr io.Writer) error {
	if kf.output == "files" {
		fmt.Fprintf(stdout, "# Delete this line from tenant %s's keyDigests in its GatewayBackend file; policyd reloads it.\n  - %s\n", kf.tenant, kf.digest)
		return nil
	}
	nsFlag := ""
	if kf.namespace != "" {
		nsFlag = " -n " + kf.namespace
	}
	fmt.Fprintf(stderr, "Apply with: kubectl patch secret %s%s --type merge --patch-file PATCH.yaml\n", kf.secret, nsFlag)
	fmt.Fprintf(stdout, `# Merge patch removing one key of tenant %s from Secret %s (the entry yardctl keys
# create wrote for digest %s).
data:
  %s: null
`, kf.tenant, kf.secret, kf.digest, secretEntry(kf.digest))
	return nil
}
