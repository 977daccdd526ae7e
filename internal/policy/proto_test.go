package policy

import (
	"testing"

	"google.golang.org/protobuf/proto"

	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// A snapshot that went through the wire decides exactly as the original.
func TestProtoRoundTrip(t *testing.T) {
	for _, paths := range [][]string{
		{examplesDir},
		append(catalogFiles, examplePolicy("burst-policy.yaml"), examplePolicy("batch-to-idle.yaml")),
	} {
		orig := mustLoad(t, paths...)
		wire := ToProto(orig, 7)
		b, err := proto.Marshal(wire)
		if err != nil {
			t.Fatal(err)
		}
		back := new(policyv1.Snapshot)
		if err := proto.Unmarshal(b, back); err != nil {
			t.Fatal(err)
		}
		got, err := FromProto(back)
		if err != nil {
			t.Fatal(err)
		}
		if back.GetRevision() != 7 || len(got.Providers) != 2 || len(got.WorkerSets) != 2 || got.Provider("databricks") == nil {
			t.Fatalf("catalog lost: %+v", got)
		}
		states := [][]edit{nil, {queued("sim-0", 3), queued("sim-1", 3)}, {kv("sim-0", 0.9)}, {down("sim-0"), down("sim-1"), down("sim-2")}, {ttft("sim-2", 0.01)}}
		reqs := []Request{
			{Model: qwen}, {Model: glm}, {Model: "standard-model"}, {Model: qwen, Tags: []string{"pii-detected"}},
			{Model: qwen, Tags: []string{"batch"}}, {Model: glm, Tags: []string{"complexity-low"}}, {Model: "nope"},
		}
		for _, st := range states {
			for _, req := range reqs {
				bs := devBackends()
				for _, e := range st {
					e(bs)
				}
				var a, b Decision
				orig.Program("").Evaluate(&req, bs, &a)
				got.Program("").Evaluate(&req, bs, &b)
				if sa, sb := a.Summary(bs), b.Summary(bs); sa != sb {
					t.Errorf("%+v: original %q, after the wire %q", req, sa, sb)
				}
			}
		}
	}
}
