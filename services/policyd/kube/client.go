package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/flagenv"
)

// homeKubeconfig is ~/.kube/config, read when neither --kubeconfig nor
// $KUBECONFIG names a file. client-go computes it once at start; a
// variable here lets tests point it elsewhere without touching $HOME.
var homeKubeconfig = clientcmd.RecommendedHomeFile

// inCluster names the configuration of a pod's service account.
const inCluster = "in-cluster service account"

// restConfig finds the client configuration as kubectl does, then as a
// pod does: --kubeconfig when given (that file alone, which must exist);
// else the files $KUBECONFIG lists, merged; else ~/.kube/config; else the
// in-cluster config. It returns where the configuration came from, for
// the log. With none of them, the error says what was tried and what to
// set, not client-go's "no configuration has been provided".
func restConfig(kubeconfig string) (*rest.Config, string, error) {
	rules := loadingRules(kubeconfig)
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, "", noConfigError(kubeconfig, rules)
	case err != nil && kubeconfig != "":
		return nil, "", fmt.Errorf("kubeconfig: %s: %w", kubeconfig, err)
	case err != nil:
		return nil, "", fmt.Errorf("kubernetes config (%s): %w", strings.Join(rules.Precedence, string(filepath.ListSeparator)), err)
	}
	return rc, configOrigin(cc, rules), nil
}

// loadingRules are client-go's standard rules, with the home file taken
// from homeKubeconfig, and no migration of old files (policyd writes
// nothing in $HOME).
func loadingRules(kubeconfig string) *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rules.MigrationRules = nil
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		rules.Precedence = []string{homeKubeconfig}
	}
	return rules
}

// configOrigin says which files the configuration came from, or that it
// is the pod's: client-go falls back to the in-cluster config when the
// files are missing or empty.
func configOrigin(cc clientcmd.ClientConfig, rules *clientcmd.ClientConfigLoadingRules) string {
	raw, err := cc.RawConfig()
	if err != nil || len(raw.Clusters) == 0 {
		return inCluster
	}
	if rules.ExplicitPath != "" {
		return rules.ExplicitPath
	}
	var files []string
	for _, f := range rules.Precedence {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	return strings.Join(files, string(filepath.ListSeparator))
}

// noConfigError lists what was tried, in order, and what to set.
func noConfigError(kubeconfig string, rules *clientcmd.ClientConfigLoadingRules) error {
	if kubeconfig != "" {
		return fmt.Errorf("kubeconfig: %s has no cluster to connect to (no current-context, or it names no server)", kubeconfig)
	}
	tried := []string{"--kubeconfig is not set"}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		tried = append(tried, fmt.Sprintf("$%s (%s) names no usable file", clientcmd.RecommendedConfigPathEnvVar, env))
	} else {
		tried = append(tried, "$"+clientcmd.RecommendedConfigPathEnvVar+" is not set",
			rules.Precedence[0]+" does not exist or names no cluster")
	}
	tried = append(tried, "not in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT unset, or no service account token)")
	return fmt.Errorf("kubeconfig: no Kubernetes configuration: %s; set --kubeconfig (or %s) or $%s to a kubeconfig file, or run policyd in a pod with a service account",
		strings.Join(tried, ", "), flagenv.EnvName("kubeconfig"), clientcmd.RecommendedConfigPathEnvVar)
}

// newDynamic is the dynamic client for kubeconfig (see restConfig) and
// where its configuration came from.
func newDynamic(kubeconfig string) (dynamic.Interface, *rest.Config, string, error) {
	rc, origin, err := restConfig(kubeconfig)
	if err != nil {
		return nil, nil, "", err
	}
	rc.UserAgent = "switchyard-policyd"
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubernetes client (%s): %w", origin, err)
	}
	return c, rc, origin, nil
}

// Startup check bounds: how long policyd waits at start for the API
// server to answer and to allow what it needs, and how often it tries
// meanwhile. A Deployment applied with its CRDs and RBAC may start before
// the server serves the CRDs or enforces the binding, and a pod may start
// while the control plane restarts. Variables for the tests.
var (
	startupTimeout = 10 * time.Second
	startupRetry   = 500 * time.Millisecond
)

// watched are the resources the source lists and watches.
func watched() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(v1alpha1.Kinds)+1)
	for _, kind := range v1alpha1.Kinds {
		out = append(out, v1alpha1.Resources[kind])
	}
	return append(out, endpointSlicesGVR)
}

// checkAccess lists one item of every resource the informers will list,
// so that a client that cannot work fails policyd before it serves,
// with the reason, instead of informers retrying forever while policyd
// says it is serving: an unreachable server, CRDs not installed, RBAC
// missing. Those are tried again until startupTimeout; refused
// credentials fail at once, as waiting does not mend them. origin is
// where the configuration came from.
func checkAccess(ctx context.Context, rc *rest.Config, namespace, origin string) error {
	// A client of its own, not throttled: the service's client allows 5
	// requests a second, which the retries would exhaust, and the last
	// attempt would then fail on the throttle instead of saying why.
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.RateLimiter = -1, nil
	client, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client (%s): %w", origin, err)
	}
	host := rc.Host
	ctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	var last error
	for {
		err := listEach(ctx, client, namespace, host, origin)
		var refused *credentialsError
		if err == nil || errors.As(err, &refused) {
			return err
		}
		// An attempt cut short by the deadline says only that; the one
		// before says why. So no attempt starts too close to it.
		if ctx.Err() == nil || last == nil {
			last = err
		}
		deadline, _ := ctx.Deadline()
		if time.Until(deadline) < 2*startupRetry {
			return startupError(host, origin, last)
		}
		time.Sleep(startupRetry)
	}
}

// startupError is the last attempt's error, said as what it was.
func startupError(host, origin string, err error) error {
	var transient *transientError
	if errors.As(err, &transient) {
		return fmt.Errorf("kubernetes API server %s (%s): not reachable within %s: %w", host, origin, startupTimeout, err)
	}
	return fmt.Errorf("kubernetes API server %s (%s), still after %s: %w", host, origin, startupTimeout, err)
}

// listEach lists one item of each watched resource. What the server
// refuses is joined, each naming its resource; the first failure to get
// an answer is returned alone, as transient.
func listEach(ctx context.Context, client dynamic.Interface, namespace, host, origin string) error {
	var errs []error
	for _, gvr := range watched() {
		_, err := client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		switch {
		case err == nil:
		case apierrors.IsUnauthorized(err):
			return &credentialsError{fmt.Errorf("kubernetes API server %s refused the credentials of %s (401 Unauthorized): check its token or client certificate", host, origin)}
		case apierrors.IsForbidden(err):
			// The server's message names the user, the verb and the
			// resource.
			errs = append(errs, fmt.Errorf("%w: policyd needs the ClusterRole of deploy/kustomize/base/policyd.yaml", err))
		case apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("%s: not served by %s: install the CRDs (deploy/kustomize/base/crds)", resourceName(gvr), host))
		case len(errs) == 0:
			return &transientError{fmt.Errorf("list %s: %w", resourceName(gvr), err)}
		default:
			errs = append(errs, fmt.Errorf("list %s: %w", resourceName(gvr), err))
		}
	}
	return errors.Join(errs...)
}

// transientError is no answer, or the server failing.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// credentialsError is the server refusing who policyd is.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

func resourceName(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource
	}
	return gvr.Resource + "." + gvr.Group
}
