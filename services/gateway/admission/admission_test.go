package admission_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/switchyard-dev/switchyard/services/gateway/admission"
	"github.com/switchyard-dev/switchyard/services/gateway/admission/defaulttenant"
)

type step func(*admission.Request) error

func (s step) Admit(_ context.Context, r *admission.Request) error { return s(r) }

func TestChain(t *testing.T) {
	setTenant := step(func(r *admission.Request) error { r.Tenant = "team-a"; return nil })
	refuse := step(func(*admission.Request) error { return &admission.Refusal{Status: http.StatusForbidden, Code: "x"} })
	dt, _ := defaulttenant.New(admission.Deps{})
	tests := []struct {
		name       string
		chain      admission.Chain
		wantTenant string
		wantErr    error
	}{
		{"an earlier step's tenant stands", admission.Chain{setTenant, dt}, "team-a", nil},
		{"default tenant", admission.Chain{dt}, defaulttenant.Tenant, nil},
		{"a refusal stops the chain", admission.Chain{refuse, setTenant}, "", &admission.Refusal{}},
		{"nobody says whose", admission.Chain{}, "", admission.ErrNoTenant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &admission.Request{}
			err := tt.chain.Admit(context.Background(), r)
			var ref *admission.Refusal
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Admit: %v", err)
			case errors.As(tt.wantErr, &ref) && !errors.As(err, &ref):
				t.Fatalf("Admit: %v, want a refusal", err)
			case errors.Is(tt.wantErr, admission.ErrNoTenant) && !errors.Is(err, admission.ErrNoTenant):
				t.Fatalf("Admit: %v, want ErrNoTenant", err)
			}
			if r.Tenant != tt.wantTenant {
				t.Errorf("tenant %q, want %q", r.Tenant, tt.wantTenant)
			}
		})
	}
}
