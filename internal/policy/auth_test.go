package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-dev/switchyard/api/v1alpha1"
)

func digestOf(key string) (string, [sha256.Size]byte) {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:]), sum
}

// A GatewayBackend with API keys compiles to a program that names each
// key's tenant, inline digests and a Secret's alike, and keeps them
// through the wire form the gateway receives.
func TestAPIKeyTenants(t *testing.T) {
	dA, sumA := digestOf("sy-key-of-team-a")
	dB, sumB := digestOf("sy-key-of-team-b")
	_, sumX := digestOf("sy-unknown")
	gw, err := ObjectOf(&v1alpha1.GatewayBackend{
		Spec: v1alpha1.GatewayBackendSpec{
			Auth: &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey},
			Tenants: []v1alpha1.Tenant{
				{Name: "team-a", KeyDigests: []string{dA}},
				{Name: "team-b", KeysSecret: "team-b-keys"},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	gw.Namespace, gw.Name = "inference", "front"
	gw.Backend.Namespace, gw.Backend.Name = "inference", "front"
	gw.KeySecrets = map[string]KeySecret{"team-b-keys": {Digests: map[string]string{"k1": dB}}}
	snap, diags := Compile([]*Object{gw})
	if diags.HasErrors() || snap == nil {
		t.Fatalf("diagnostics: %v", diags)
	}
	wire, err := FromProto(ToProto(snap, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Snapshot{snap, wire} {
		p := s.Program("front")
		if p.AuthMode != string(v1alpha1.AuthAPIKey) || p.AuthKeys() != 2 {
			t.Fatalf("program: mode %s, %d keys", p.AuthMode, p.AuthKeys())
		}
		for sum, want := range map[[sha256.Size]byte]string{sumA: "team-a", sumB: "team-b", sumX: ""} {
			if got, ok := p.KeyTenant(sum); got != want || ok != (want != "") {
				t.Errorf("KeyTenant = %q %v, want %q", got, ok, want)
			}
		}
	}
}

// A Secret the kubernetes source could not read refuses the backend with
// the reason, never an empty key list silently served.
func TestAPIKeySecretUnreadable(t *testing.T) {
	gw, _ := ObjectOf(&v1alpha1.GatewayBackend{Spec: v1alpha1.GatewayBackendSpec{
		Auth:    &v1alpha1.AuthSpec{Mode: v1alpha1.AuthAPIKey},
		Tenants: []v1alpha1.Tenant{{Name: "team-b", KeysSecret: "team-b-keys"}},
	}})
	gw.Namespace, gw.Name = "inference", "front"
	gw.KeySecrets = map[string]KeySecret{"team-b-keys": {Err: "not found"}}
	_, diags := Compile([]*Object{gw})
	want := `GatewayBackend inference/front: spec.tenants[0].keysSecret: Secret inference/team-b-keys: not found`
	var errs []string
	for _, d := range diags {
		if d.Severity == SeverityError {
			errs = append(errs, d.String())
		}
	}
	if len(errs) != 1 || errs[0] != want {
		t.Fatalf("diagnostics %v, want %s", diags, want)
	}
}

// A GatewayBackend naming an identity provider compiles to a program
// carrying it, defaults applied, through the wire form too; a tenant
// reached only through JWTs needs no key and draws no warning; each mode
// asks the gateway for the credentials it accepts.
func TestJWTAuth(t *testing.T) {
	dA, sumA := digestOf("sy-key-of-team-a")
	idp := &v1alpha1.JWTAuth{Issuer: "https://login.example.com/", Audiences: []string{"switchyard", "api://sy"}, JWKSURL: "https://login.example.com/keys"}
	for _, c := range []struct {
		mode    v1alpha1.AuthMode
		tenants []v1alpha1.Tenant
		want    []string
	}{
		{v1alpha1.AuthJWT, []v1alpha1.Tenant{{Name: "team-a"}, {Name: "team-b"}}, []string{"JWT"}},
		{v1alpha1.AuthAPIKey, []v1alpha1.Tenant{{Name: "team-a", KeyDigests: []string{dA}}, {Name: "team-b"}}, []string{"APIKey", "JWT"}},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			gw, err := ObjectOf(&v1alpha1.GatewayBackend{Spec: v1alpha1.GatewayBackendSpec{
				Auth:    &v1alpha1.AuthSpec{Mode: c.mode, JWT: idp},
				Tenants: c.tenants,
			}})
			if err != nil {
				t.Fatal(err)
			}
			gw.Namespace, gw.Name = "inference", "front"
			gw.Backend.Namespace, gw.Backend.Name = "inference", "front"
			snap, diags := Compile([]*Object{gw})
			for _, d := range diags {
				if d.Path != "" {
					t.Errorf("diagnostic %s (want none: no warning for a keyless tenant)", d)
				}
			}
			if snap == nil {
				t.Fatalf("not compiled: %v", diags)
			}
			wire, err := FromProto(ToProto(snap, 1))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Snapshot{snap, wire} {
				p := s.Program("front")
				j := p.JWT
				if j == nil || j.Issuer != idp.Issuer || !slices.Equal(j.Audiences, idp.Audiences) || j.JWKSURL != idp.JWKSURL ||
					j.TenantClaim != DefaultJWTTenantClaim || j.ClockSkew != DefaultJWTClockSkew || j.Refresh != DefaultJWTRefresh {
					t.Fatalf("program's jwt %+v", j)
				}
				if got := p.Credentials(); !slices.Equal(got, c.want) {
					t.Errorf("Credentials() = %v, want %v", got, c.want)
				}
				if !p.IsAuthTenant("team-b") || p.IsAuthTenant("team-z") {
					t.Error("IsAuthTenant: team-b is one, team-z is not")
				}
				if tenant, ok := p.KeyTenant(sumA); ok != (c.mode == v1alpha1.AuthAPIKey) || ok && tenant != "team-a" {
					t.Errorf("KeyTenant = %q %v", tenant, ok)
				}
			}
		})
	}
	for mode, want := range map[v1alpha1.AuthMode][]string{v1alpha1.AuthNone: nil, v1alpha1.AuthAPIKey: {"APIKey"}, "Future": {"Future"}} {
		if got := (&Program{AuthMode: string(mode)}).Credentials(); !slices.Equal(got, want) {
			t.Errorf("mode %s without jwt: Credentials() = %v, want %v", mode, got, want)
		}
	}
}

// Each bad spec.auth.jwt is refused at its field's path, whatever else is
// wrong with it (one error per field, all at once).
func TestJWTAuthInvalid(t *testing.T) {
	good := func() *v1alpha1.JWTAuth {
		return &v1alpha1.JWTAuth{Issuer: "https://idp.example/", Audiences: []string{"sy"}, JWKSURL: "https://idp.example/keys"}
	}
	long := strings.Repeat("a", 1025)
	for _, c := range []struct {
		name string
		mode v1alpha1.AuthMode
		edit func(j *v1alpha1.JWTAuth)
		want []string
	}{
		{"issuer required", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.Issuer = "" }, []string{"spec.auth.jwt.issuer: required"}},
		{"issuer too long", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.Issuer = long }, []string{"spec.auth.jwt.issuer: want 1 to 1024 bytes"}},
		{"audiences", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.Audiences = []string{"sy", long, "sy"} }, []string{
			"spec.auth.jwt.audiences[1]: want an audience", `spec.auth.jwt.audiences[2]: audience "sy" listed twice`}},
		{"too many audiences", v1alpha1.AuthAPIKey, func(j *v1alpha1.JWTAuth) {
			for i := range 16 {
				j.Audiences = append(j.Audiences, strings.Repeat("a", i+1))
			}
		}, []string{"spec.auth.jwt.audiences: 17 audiences"}},
		{"tenant claim", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.TenantClaim = strings.Repeat("c", 257) }, []string{"spec.auth.jwt.tenantClaim: want a claim name"}},
		{"no JWKS", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.JWKSURL = "" }, []string{"spec.auth.jwt.jwksURL: required"}},
		{"plain http", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.JWKSURL = "http://idp.example/keys" }, []string{"spec.auth.jwt.jwksURL: http is accepted only to a loopback"}},
		{"credentials", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { j.JWKSURL = "https://u:p@idp.example/keys" }, []string{"spec.auth.jwt.jwksURL: credentials"}},
		{"durations", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) {
			j.ClockSkew, j.RefreshInterval = &metav1.Duration{Duration: -time.Second}, &metav1.Duration{Duration: 48 * time.Hour}
		}, []string{"spec.auth.jwt.clockSkew: -1s: want 0 to", "spec.auth.jwt.refreshInterval: 48h0m0s: want 10s to"}},
		{"mode None", v1alpha1.AuthNone, nil, []string{"spec.auth.jwt: set with auth mode None"}},
		{"mode JWT without jwt", v1alpha1.AuthJWT, func(j *v1alpha1.JWTAuth) { *j = v1alpha1.JWTAuth{} }, []string{"spec.auth.jwt: required by auth mode JWT"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := good()
			if c.edit != nil {
				c.edit(j)
			}
			auth := &v1alpha1.AuthSpec{Mode: c.mode, JWT: j}
			if j.Issuer == "" && j.JWKSURL == "" && len(j.Audiences) == 0 {
				auth.JWT = nil
			}
			spec := v1alpha1.GatewayBackendSpec{Auth: auth}
			if c.mode != v1alpha1.AuthNone {
				spec.Tenants = []v1alpha1.Tenant{{Name: "team-a"}}
			}
			gw, err := ObjectOf(&v1alpha1.GatewayBackend{Spec: spec})
			if err != nil {
				t.Fatal(err)
			}
			gw.Namespace, gw.Name = "inference", "front"
			snap, diags := Compile([]*Object{gw})
			if snap != nil {
				t.Fatal("compiled")
			}
			var errs []string
			for _, d := range diags {
				if d.Severity == SeverityError {
					errs = append(errs, d.Path+": "+d.Message)
				}
			}
			if len(errs) != len(c.want) {
				t.Fatalf("errors %q, want %d: %q", errs, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(errs[i], w) {
					t.Errorf("error %q, want it to start %q", errs[i], w)
				}
			}
		})
	}
}
