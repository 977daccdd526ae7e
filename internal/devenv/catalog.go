package devenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
	"github.com/switchyard-dev/switchyard/internal/apikey"
	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/sim"
	"github.com/switchyard-dev/switchyard/services/policyd"
)

// DefaultPolicies is the catalog `switchyard dev` loads when it exists
// (run from the repository root).
const DefaultPolicies = "deploy/examples"

// catalogFleet is what startCatalog brought up for a policy catalog.
type catalogFleet struct {
	// dir is what policyd reads: the catalog itself, or a copy with the
	// simulators' real addresses when they could not bind the catalog's.
	dir string
	// kvEvents says whether any simulated worker publishes KV events at an
	// endpoint the catalog lists: the kvtracker, following policyd, has
	// something to ingest.
	kvEvents bool
	// models served locally and by providers, for the banner.
	models, aliases []string
	// keys are the tenants' keys when Config.Auth is on, in
	// Config.Tenants order.
	keys []tenantKey
}

type tenantKey struct{ tenant, key string }

// DevTenant is the tenant whose key `switchyard dev --auth` makes.
const DevTenant = "dev"

// startCatalog starts the simulators a catalog describes: one fleet per
// InferenceWorkerSet (its static workers, serving its model, publishing
// KV events when the catalog lists their endpoints) and one simulated
// OpenAI-compatible endpoint per InferenceProvider (serving the provider's
// own model names), but for a provider of type Bedrock the fake Bedrock
// runtime (startBedrock). With cfg.Sim.Port 0 every simulator takes a free port
// and policyd reads a copy of the catalog rewritten to them (KV endpoints
// included); otherwise they bind the catalog's addresses and policyd reads
// the catalog itself, reloading it on change. The router and the
// kvtracker both take the workers from policyd.
func (s *Stack) startCatalog(ctx context.Context, cfg Config, log zerolog.Logger) (*catalogFleet, error) {
	snap, diags, err := policy.Load(cfg.Policies)
	if err != nil {
		return nil, fmt.Errorf("load policies %s: %w", cfg.Policies, err)
	}
	if snap == nil {
		return nil, fmt.Errorf("policies %s: %w", cfg.Policies, diags.Err())
	}
	free := cfg.Sim.Port == 0
	cf := &catalogFleet{dir: cfg.Policies}
	moved := map[string]string{} // catalog URL → simulator URL
	start := func(sc sim.Config, what string) ([]sim.WorkerInfo, error) {
		f, err := sim.StartFleet(context.WithoutCancel(ctx), sc, log.With().Str("service", "sim").Str("fleet", what).Logger())
		if err != nil {
			return nil, fmt.Errorf("start simulated %s: %w", what, err)
		}
		s.fleets = append(s.fleets, f)
		return f.Workers(), nil
	}

	for _, ws := range snap.WorkerSets {
		if len(ws.Static) == 0 {
			continue
		}
		sc := cfg.Sim
		sc.Workers = len(ws.Static)
		sc.ServedModelName = ws.Model
		if ws.BlockSize > 0 {
			sc.BlockSize = int(ws.BlockSize)
		}
		if ws.Static[0].KVEventsEndpoint == "" {
			// The catalog says these workers publish no KV events: nothing
			// would read them.
			sc.KVEventsConfig = ""
		}
		if !free {
			if sc.Port, err = urlPort(ws.Static[0].URL); err != nil {
				return nil, fmt.Errorf("worker set %s: %w", ws.Name, err)
			}
			if sc.KVEventsConfig != "" {
				if sc.KVEventsConfig, err = kvEventsConfig(ws.Static[0].KVEventsEndpoint, ws.Static[0].KVReplayEndpoint); err != nil {
					return nil, fmt.Errorf("worker set %s: %w", ws.Name, err)
				}
			}
		}
		ws := ws
		infos, err := start(sc, "worker set "+ws.Name)
		if err != nil {
			return nil, err
		}
		for i, w := range infos {
			st := ws.Static[i]
			s.sims = append(s.sims, simulated{name: st.ID, models: ws.Model, url: w.URL, kv: w.KVEndpoint, replay: w.ReplayEndpoint, vllm: true})
			if w.URL != strings.TrimRight(st.URL, "/") {
				moved[st.URL] = w.URL
			}
			if w.KVEndpoint == "" || st.KVEventsEndpoint == "" {
				continue
			}
			cf.kvEvents = true
			if w.KVEndpoint != st.KVEventsEndpoint {
				moved[st.KVEventsEndpoint] = w.KVEndpoint
			}
			if st.KVReplayEndpoint != "" && w.ReplayEndpoint != "" && w.ReplayEndpoint != st.KVReplayEndpoint {
				moved[st.KVReplayEndpoint] = w.ReplayEndpoint
			}
		}
		if !slices.Contains(cf.models, ws.Model) {
			cf.models = append(cf.models, ws.Model)
		}
	}

	for _, p := range snap.Providers {
		if len(p.Models) == 0 {
			continue
		}
		if p.Type == string(v1alpha1.ProviderBedrock) {
			if err := s.startBedrock(p, free, cfg.Sim.Host, moved, log); err != nil {
				return nil, err
			}
			continue
		}
		sc := cfg.Sim
		sc.Workers = 1
		sc.KVEventsConfig = ""
		var names []string
		for _, m := range p.Models {
			if m.ServedName == "" {
				m.ServedName = m.Name
			}
			names = append(names, m.ServedName)
		}
		sc.ServedModelName = strings.Join(names, ",")
		u, err := url.Parse(p.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("provider %s: base url: %w", p.Name, err)
		}
		if !free {
			if sc.Port, err = urlPort(p.BaseURL); err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
		}
		infos, err := start(sc, "provider "+p.Name)
		if err != nil {
			return nil, err
		}
		if got := infos[0].URL + u.Path; got != p.BaseURL {
			moved[p.BaseURL] = got
		}
		s.sims = append(s.sims, simulated{provider: true, name: p.Name, models: strings.Join(names, ", "), url: infos[0].URL + u.Path, api: "simulated, OpenAI API", vllm: true})
		// The simulated provider takes any key; the gateway still needs one
		// to send, as it would to a real provider.
		if env := p.Credentials.Env; env != "" && os.Getenv(env) == "" {
			if err := os.Setenv(env, "dev-key-"+p.Name); err != nil {
				return nil, fmt.Errorf("provider %s: set %s: %w", p.Name, env, err)
			}
			log.Info().Str("provider", p.Name).Str("env", env).Msg("provider key not set: using a placeholder for the simulated provider")
		}
	}
	for _, prog := range snap.Programs {
		for _, m := range prog.Models {
			if !slices.Contains(cf.models, m) && !slices.Contains(cf.aliases, m) && !servedLocally(snap, m) {
				cf.aliases = append(cf.aliases, m)
			}
		}
	}

	var keyed func(*v1alpha1.GatewayBackend)
	if cfg.Auth {
		var tenants []v1alpha1.Tenant
		for _, name := range cfg.Tenants {
			key := apikey.Generate()
			cf.keys = append(cf.keys, tenantKey{tenant: name, key: key})
			tenants = append(tenants, v1alpha1.Tenant{Name: name, KeyDigests: []string{apikey.Digest(key)}})
		}
		keyed = func(gb *v1alpha1.GatewayBackend) {
			gb.Spec.Auth = &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey}
			gb.Spec.Tenants = append(gb.Spec.Tenants, tenants...)
		}
		if err := writeKeys(cfg.KeysFile, cf.keys); err != nil {
			return nil, err
		}
	}
	if len(moved) > 0 || keyed != nil {
		dir, err := rewriteCatalog(cfg.Policies, moved, keyed)
		if err != nil {
			return nil, err
		}
		s.tempDirs = append(s.tempDirs, dir)
		cf.dir = dir
	}
	return cf, nil
}

// writeKeys writes keys to path (none when path is empty), one
// TENANT=KEY line each, readable by the owner only.
func writeKeys(path string, keys []tenantKey) error {
	if path == "" {
		return nil
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k.tenant, k.key)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("keys-file: %w", err)
	}
	return nil
}

func servedLocally(snap *policy.Snapshot, model string) bool {
	return slices.ContainsFunc(snap.WorkerSets, func(ws policy.WorkerSet) bool { return ws.Model == model })
}

func urlPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("url %q: %w", raw, err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("url %q: no port to simulate on", raw)
	}
	return p, nil
}

// kvEventsConfig is the --kv-events-config a vLLM worker is started with so
// that the kvtracker can dial it at the catalog's endpoints: the catalog
// names where the worker publishes (tcp://127.0.0.1:5557), and the worker
// must bind that port, which vLLM does only for a wildcard endpoint
// (tcp://*:5557; with the catalog's own host the worker would connect,
// and nobody would bind). The simulator binds the wildcard on its --host.
func kvEventsConfig(endpoint, replay string) (string, error) {
	pub, err := wildcardHost(endpoint)
	if err != nil {
		return "", fmt.Errorf("kvEventsEndpoint: %w", err)
	}
	c := `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":` + strconv.Quote(pub)
	if replay != "" {
		rep, err := wildcardHost(replay)
		if err != nil {
			return "", fmt.Errorf("kvReplayEndpoint: %w", err)
		}
		c += `,"replay_endpoint":` + strconv.Quote(rep)
	}
	return c + "}", nil
}

// wildcardHost turns tcp://host:port into tcp://*:port.
func wildcardHost(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "tcp://")
	if !ok {
		return "", fmt.Errorf("%q: the simulated fleet needs tcp://host:port", endpoint)
	}
	_, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("%q: %w", endpoint, err)
	}
	return "tcp://*:" + port, nil
}

// rewriteCatalog copies the catalog's YAML files into a temporary
// directory with every moved address replaced (longest first, so no
// address is rewritten inside a longer one).
func rewriteCatalog(src string, moved map[string]string, keyed func(*v1alpha1.GatewayBackend)) (string, error) {
	files, err := policy.ListYAML(src)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", src, err)
	}
	dir, err := os.MkdirTemp("", "switchyard-dev-catalog-")
	if err != nil {
		return "", fmt.Errorf("catalog copy: %w", err)
	}
	olds := make([]string, 0, len(moved))
	for o := range moved {
		olds = append(olds, o)
	}
	slices.SortFunc(olds, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(olds))
	for _, o := range olds {
		pairs = append(pairs, o, moved[o])
	}
	r := strings.NewReplacer(pairs...)
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("catalog copy: %w", err)
		}
		name := fmt.Sprintf("%03d-%s", i, filepath.Base(f))
		text := r.Replace(string(data))
		if keyed != nil {
			if text, err = keyBackends(text, keyed); err != nil {
				_ = os.RemoveAll(dir)
				return "", fmt.Errorf("catalog copy: %s: %w", f, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("catalog copy: %w", err)
		}
	}
	return dir, nil
}

// docSeparator splits a YAML stream into documents.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// keyBackends rewrites the GatewayBackends of a YAML stream with edit (the
// other documents are kept as they are).
func keyBackends(text string, edit func(*v1alpha1.GatewayBackend)) (string, error) {
	docs := docSeparator.Split(text, -1)
	for i, doc := range docs {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind != v1alpha1.KindGatewayBackend {
			continue
		}
		var gb v1alpha1.GatewayBackend
		if err := yaml.UnmarshalStrict([]byte(doc), &gb); err != nil {
			return "", err
		}
		edit(&gb)
		out, err := yaml.Marshal(map[string]any{
			"apiVersion": gb.APIVersion, "kind": gb.Kind,
			"metadata": map[string]any{"name": gb.Name, "namespace": gb.Namespace},
			"spec":     gb.Spec,
		})
		if err != nil {
			return "", err
		}
		docs[i] = "\n# API keys on (switchyard dev --auth)\n" + string(out)
	}
	return strings.Join(docs, "---"), nil
}

// startPolicyd runs policyd in files mode on dir.
func (s *Stack) startPolicyd(ctx context.Context, cfg Config, dir string, log zerolog.Logger) error {
	pc := policyd.DefaultConfig()
	pc.GRPCAddr, pc.HTTPAddr = cfg.PolicydGRPCAddr, cfg.PolicydHTTPAddr
	pc.Source = policyd.SourceFiles
	pc.Paths = []string{dir}
	pd, err := policyd.New(pc, log.With().Str("service", "policyd").Logger())
	if err != nil {
		return fmt.Errorf("start policyd: %w", err)
	}
	s.policyd = pd
	s.policydRun = runInBackground(ctx, pd.Serve)
	return nil
}
