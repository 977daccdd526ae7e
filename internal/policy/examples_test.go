package policy

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

const (
	qwen = "qwen-3.6-27b"
	glm  = "glm-5.3"
)

// Each seed example alone with the dev catalog: its intent, as its
// comment states it, through the evaluator.

func TestExampleBurst(t *testing.T) {
	// "When local workers are saturated (more than 2 queued prompts),
	// burst to third-party providers in the given order of preference."
	prog := mustLoad(t, append(catalogFiles, examplePolicy("burst-policy.yaml"))...).Program("")
	const rule = "burst-policy/burst-to-cloud"
	local := "select[0] Local minimize PredictedTTFT"
	burst := "select[1] Provider order [bedrock databricks]"
	drop := "burst-policy/burst-to-cloud/drop-overloaded-workers"
	runDecisions(t, prog, []decisionCase{
		{name: "idle: fastest local worker", req: Request{Model: qwen}, outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: local},
		{name: "local wins even when a provider is predicted faster", req: Request{Model: qwen}, state: []edit{ttft("provider/databricks", 0.01)},
			outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: local},
		{name: "two queued is not saturated", req: Request{Model: qwen}, state: []edit{queued("sim-0", 2), queued("sim-1", 2)},
			outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: local},
		{name: "one saturated worker: the other takes it", req: Request{Model: qwen}, state: []edit{queued("sim-0", 3)},
			outcome: Routed, id: "sim-1", model: qwen, rule: rule, tier: local, dropped: map[string]string{"sim-0": drop}},
		{name: "local queues at 3: bedrock first in order", req: Request{Model: qwen}, state: []edit{queued("sim-0", 3), queued("sim-1", 3)},
			outcome: Routed, id: "provider/bedrock", model: qwen, rule: rule, tier: burst, dropped: map[string]string{"sim-0": drop, "sim-1": drop}},
		{name: "order beats predicted TTFT", req: Request{Model: qwen}, state: []edit{queued("sim-0", 3), queued("sim-1", 3), ttft("provider/databricks", 0.05)},
			outcome: Routed, id: "provider/bedrock", model: qwen, rule: rule, tier: burst},
		{name: "bedrock down: databricks", req: Request{Model: qwen}, state: []edit{queued("sim-0", 3), queued("sim-1", 3), down("provider/bedrock")},
			outcome: Routed, id: "provider/databricks", model: qwen, rule: rule, tier: burst},
		{name: "glm saturated: bedrock serves glm", req: Request{Model: glm}, state: []edit{queued("sim-2", 5)},
			outcome: Routed, id: "provider/bedrock", model: glm, rule: rule, tier: burst},
		{name: "glm saturated, bedrock down: no tier, fallback to default routing", req: Request{Model: glm}, state: []edit{queued("sim-2", 5), down("provider/bedrock")},
			outcome: Routed, id: "sim-2", model: glm, rule: "", tier: "default"},
	})
}

func TestExamplePIIStaysLocal(t *testing.T) {
	// "Prompts tagged as containing personal data never leave the cluster;
	// if no local backend can take them, the request is rejected (fail
	// closed)." Without the tag, its first tier prefers databricks.
	prog := mustLoad(t, append(catalogFiles, examplePolicy("pii-stays-local.yaml"))...).Program("")
	const rule = "pii-stays-local/serve"
	drop := "pii-stays-local/serve/pii-never-leaves-cluster"
	pii := []string{"pii-detected"}
	runDecisions(t, prog, []decisionCase{
		{name: "no tag: databricks", req: Request{Model: qwen}, outcome: Routed, id: "provider/databricks", model: qwen, rule: rule, tier: "select[0] Provider order [databricks]"},
		{name: "no tag, databricks down: local", req: Request{Model: qwen}, state: []edit{down("provider/databricks")},
			outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: "select[1] Local minimize PredictedTTFT"},
		{name: "pii: local, providers dropped", req: Request{Model: qwen, Tags: pii}, outcome: Routed, id: "sim-0", model: qwen, rule: rule,
			tier: "select[1] Local minimize PredictedTTFT", neverType: TypeProvider, dropped: map[string]string{"provider/databricks": drop, "provider/bedrock": drop}},
		{name: "pii with other tags", req: Request{Model: qwen, Tags: []string{"batch", "pii-detected"}}, state: []edit{ttft("sim-1", 0.01)},
			outcome: Routed, id: "sim-1", model: qwen, rule: rule, tier: "select[1] Local minimize PredictedTTFT", neverType: TypeProvider},
		{name: "pii, every local down: rejected, not sent out", req: Request{Model: qwen, Tags: pii}, state: []edit{down("sim-0"), down("sim-1")},
			outcome: Rejected, rule: rule},
		{name: "pii on glm: local", req: Request{Model: glm, Tags: pii}, outcome: Routed, id: "sim-2", model: glm, rule: rule, tier: "select[1] Local minimize PredictedTTFT"},
		{name: "pii on glm, local down: rejected", req: Request{Model: glm, Tags: pii}, state: []edit{down("sim-2")}, outcome: Rejected, rule: rule},
	})
}

func TestExampleBatchToIdle(t *testing.T) {
	// "Batch traffic only goes to workers whose KV cache is under 70% full
	// ... No idle worker: reject, do not burst."
	prog := mustLoad(t, append(catalogFiles, examplePolicy("batch-to-idle.yaml"))...).Program("")
	const rule = "batch-to-idle/batch-only-on-idle-gpus"
	drop := rule + "/drop-busy-workers"
	batch := []string{"batch"}
	tier := "select[0] Local minimize PredictedTTFT"
	runDecisions(t, prog, []decisionCase{
		{name: "batch: the idle worker, even if slower", req: Request{Model: qwen, Tags: batch}, state: []edit{kv("sim-0", 0.85), kv("sim-1", 0.30), ttft("sim-1", 2)},
			outcome: Routed, id: "sim-1", model: qwen, rule: rule, tier: tier, dropped: map[string]string{"sim-0": drop}},
		{name: "exactly 70% counts as busy", req: Request{Model: qwen, Tags: batch}, state: []edit{kv("sim-0", 0.70), kv("sim-1", 0.69)},
			outcome: Routed, id: "sim-1", model: qwen, rule: rule, tier: tier, dropped: map[string]string{"sim-0": drop}},
		{name: "every worker busy: reject, no burst", req: Request{Model: qwen, Tags: batch}, state: []edit{kv("sim-0", 0.9), kv("sim-1", 0.7)},
			outcome: Rejected, rule: rule},
		{name: "batch never goes to a provider", req: Request{Model: qwen, Tags: batch}, state: []edit{ttft("provider/databricks", 0.001)},
			outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: tier, neverType: TypeProvider},
		{name: "interactive traffic may use a busy worker", req: Request{Model: qwen}, state: []edit{kv("sim-0", 0.95), kv("sim-1", 0.95)},
			outcome: Routed, id: "sim-0", model: qwen, rule: "", tier: "default"},
	})
}

func TestExampleModelAlias(t *testing.T) {
	// "clients ask for standard-model and get whichever backing model is
	// predicted fastest."
	prog := mustLoad(t, append(catalogFiles, examplePolicy("model-alias.yaml"))...).Program("")
	const rule = "standard-model-alias/standard-model"
	tier := "select[0] Any minimize PredictedTTFT"
	alias := "standard-model"
	runDecisions(t, prog, []decisionCase{
		{name: "qwen fastest", req: Request{Model: alias}, outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: tier},
		{name: "glm fastest: served as glm-5.3", req: Request{Model: alias}, state: []edit{ttft("sim-2", 0.05)}, outcome: Routed, id: "sim-2", model: glm, rule: rule, tier: tier},
		{name: "providers serving a backing model count too", req: Request{Model: alias}, state: []edit{queued("sim-0", 9), ttft("sim-0", 3), ttft("sim-1", 3), ttft("sim-2", 3)},
			outcome: Routed, id: "provider/databricks", model: qwen, rule: rule, tier: tier},
		{name: "the backing model by name: no alias rule", req: Request{Model: glm}, state: []edit{ttft("sim-0", 0.01)}, outcome: Routed, id: "sim-2", model: glm, rule: "", tier: "default"},
		{name: "near-tie keeps scan order", req: Request{Model: alias}, state: []edit{ttft("sim-0", 0.200), ttft("sim-1", 0.1995)}, outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: tier},
		{name: "rotation spreads near-ties", req: Request{Model: alias, Rotation: 1}, state: []edit{ttft("sim-0", 0.200), ttft("sim-1", 0.1995)}, outcome: Routed, id: "sim-1", model: qwen, rule: rule, tier: tier},
		{name: "every backing backend down", req: Request{Model: alias}, state: []edit{down("sim-0"), down("sim-1"), down("sim-2"), down("provider/bedrock"), down("provider/databricks")},
			outcome: NoBackend},
	})
}

func TestExampleSmartSemanticRouting(t *testing.T) {
	// "Simple prompts asked of the expensive model may go to the cheaper
	// one, unless cache overlap makes the expensive model faster."
	prog := mustLoad(t, append(catalogFiles, examplePolicy("smart-semantic-routing.yaml"))...).Program("")
	const rule = "smart-semantic-routing/low-complexity-consider-qwen"
	tier := "select[0] Any minimize PredictedTTFT"
	simple := []string{"complexity-low"}
	cached := func(b *Backend) { b.CachedTokens, b.PredictedTTFT = 7000, 0.04 }
	runDecisions(t, prog, []decisionCase{
		{name: "simple glm prompt: cheaper qwen", req: Request{Model: glm, Tags: simple}, outcome: Routed, id: "sim-0", model: qwen, rule: rule, tier: tier},
		{name: "cache makes glm faster: glm", req: Request{Model: glm, Tags: simple}, state: []edit{on("sim-2", cached)}, outcome: Routed, id: "sim-2", model: glm, rule: rule, tier: tier},
		{name: "not simple: glm", req: Request{Model: glm}, outcome: Routed, id: "sim-2", model: glm, rule: "", tier: "default"},
		{name: "simple qwen prompt: rule is for glm only", req: Request{Model: qwen, Tags: simple}, state: []edit{ttft("sim-2", 0.01)}, outcome: Routed, id: "sim-0", model: qwen, rule: "", tier: "default"},
	})
}

// The dev catalog: every example together, pii-stays-local as a guard.
func TestDevCatalog(t *testing.T) {
	s := mustLoad(t, examplesDir)
	if len(s.Warnings) > 0 {
		t.Errorf("dev catalog has warnings:\n%s", s.Warnings.Error())
	}
	prog := s.Program("")
	if prog == nil || prog.Name != "dev" {
		t.Fatalf("program %+v, want the dev GatewayBackend", prog)
	}
	pii := []string{"pii-detected"}
	burst := "burst-policy/burst-to-cloud"
	guard := "pii-stays-local/serve/pii-never-leaves-cluster"
	saturated := []edit{queued("sim-0", 3), queued("sim-1", 3)}
	runDecisions(t, prog, []decisionCase{
		{name: "plain qwen: local", req: Request{Model: qwen}, outcome: Routed, id: "sim-0", model: qwen, rule: burst, tier: "select[0] Local minimize PredictedTTFT"},
		{name: "saturated qwen: bursts to bedrock", req: Request{Model: qwen}, state: saturated, outcome: Routed, id: "provider/bedrock", model: qwen, rule: burst, tier: "select[1] Provider order [bedrock databricks]"},
		{name: "saturated qwen with pii: the guard keeps it in, and fails closed", req: Request{Model: qwen, Tags: pii}, state: append(saturated, down("sim-0"), down("sim-1")),
			outcome: Rejected, rule: "pii-stays-local/serve"},
		{name: "saturated qwen with pii: no burst, default routing stays local", req: Request{Model: qwen, Tags: pii}, state: saturated,
			outcome: Routed, id: "sim-0", model: qwen, rule: "", tier: "default", neverType: TypeProvider, dropped: map[string]string{"provider/bedrock": guard, "provider/databricks": guard}},
		{name: "alias", req: Request{Model: "standard-model"}, state: []edit{ttft("sim-2", 0.01)}, outcome: Routed, id: "sim-2", model: glm, rule: "standard-model-alias/standard-model", tier: "select[0] Any minimize PredictedTTFT"},
		{name: "alias with pii: providers dropped by the guard", req: Request{Model: "standard-model", Tags: pii}, state: []edit{ttft("sim-0", 5), ttft("sim-1", 5), ttft("sim-2", 5)},
			outcome: Routed, id: "sim-0", model: qwen, rule: "standard-model-alias/standard-model", tier: "select[0] Any minimize PredictedTTFT", neverType: TypeProvider},
		{name: "batch on busy GPUs: rejected before burst", req: Request{Model: qwen, Tags: []string{"batch"}}, state: []edit{kv("sim-0", 0.9), kv("sim-1", 0.9)},
			outcome: Rejected, rule: "batch-to-idle/batch-only-on-idle-gpus"},
		{name: "simple glm: qwen", req: Request{Model: glm, Tags: []string{"complexity-low"}}, outcome: Routed, id: "sim-0", model: qwen, rule: "smart-semantic-routing/low-complexity-consider-qwen", tier: "select[0] Any minimize PredictedTTFT"},
	})
	if got := prog.TenantTags("payroll"); len(got) != 1 || got[0] != "pii-detected" {
		t.Errorf("payroll tags %q", got)
	}
	if prog.TagsHeader != "x-switchyard-tags" || !prog.TagAllowed("batch") || prog.TagAllowed("vip") {
		t.Errorf("tags header %q, allowed %q", prog.TagsHeader, prog.AllowedTags)
	}
	if p := s.Provider("bedrock"); p == nil {
		t.Error("no bedrock")
	} else if n, ok := p.ServedName(glm); !ok || n != "zai.glm-5-3-v1:0" {
		t.Errorf("bedrock serves glm as %q %v", n, ok)
	}
	var models []string
	models = prog.ConsiderModels(&Request{Model: "standard-model"}, models)
	if len(models) != 3 || models[0] != "standard-model" {
		t.Errorf("consider models %q", models)
	}
}

// The dev catalog's policies are the seed examples, unchanged.
func TestExamplesMatchSeed(t *testing.T) {
	// shared/ sits beside the checkout (workspace and CI layout);
	// SWITCHYARD_SHARED points elsewhere.
	shared := os.Getenv("SWITCHYARD_SHARED")
	if shared == "" {
		shared = filepath.Join("..", "..", "..", "shared")
	}
	seed := filepath.Join(shared, "examples", "policies")
	if _, err := os.Stat(seed); err != nil {
		t.Skipf("SKIP: %s not found (shared/ beside the repository, or set SWITCHYARD_SHARED)", seed)
	}
	files, err := filepath.Glob(filepath.Join(seed, "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("seed examples: %v %v", files, err)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(examplePolicy(filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the seed %s", examplePolicy(filepath.Base(f)), f)
		}
	}
}
