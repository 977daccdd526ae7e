package router_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router"
)

const operatorToken = "0123456789abcdef0123456789abcdef"

func tokenFile(t *testing.T, tok string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// rest does one REST call with an optional authorization header.
func rest(t *testing.T, method, url, auth, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func withAuth(auth string) context.Context {
	if auth == "" {
		return context.Background()
	}
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", auth)
}

const explainBody = `{"model":"m","messages":[{"role":"user","content":"is this prefix cached anywhere?"}]}`

// TestOperatorToken: with --operator-token-file, Explain and ListEndpoints
// answer only callers presenting the token, over gRPC and REST; Route, the
// gateway's call, needs nothing.
func TestOperatorToken(t *testing.T) {
	w := newFakeWorker(t, "m")
	tr := startRouter(t, func(c *router.Config) { c.OperatorTokenFile = tokenFile(t, operatorToken) }, w)
	base := "http://" + tr.srv.HTTPAddr()

	for _, auth := range []string{"", "Bearer wrong-token-wrong-token-wrong", "Basic " + operatorToken, operatorToken, "Bearer " + operatorToken + "x"} {
		_, err := tr.client.Explain(withAuth(auth), &routerv1.RouteRequest{Model: "m"})
		if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "operator role") {
			t.Errorf("Explain with %q: %v, want Unauthenticated naming the operator role", auth, err)
		}
		_, err = tr.client.ListEndpoints(withAuth(auth), &routerv1.ListEndpointsRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListEndpoints with %q: %v, want Unauthenticated", auth, err)
		}
		code, body, hdr := rest(t, http.MethodPost, base+"/v1/route:explain", auth, explainBody)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if code != http.StatusUnauthorized || json.Unmarshal([]byte(body), &e) != nil || e.Code != int(codes.Unauthenticated) ||
			!strings.Contains(e.Message, "--token-file") || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("REST explain with %q: %d %s %v", auth, code, body, hdr)
		}
		if code, body, _ := rest(t, http.MethodGet, base+"/v1/endpoints", auth, ""); code != http.StatusUnauthorized {
			t.Errorf("REST endpoints with %q: %d %s", auth, code, body)
		}
	}
	// Other spellings of the guarded paths reach nothing.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/endpoints/"}, {http.MethodGet, "/v1//endpoints"}, {http.MethodGet, "/v1/endpoints?model=m"},
		{http.MethodGet, "/V1/endpoints"}, {http.MethodPost, "/v1/route:explain/"}, {http.MethodPost, "/v1/route%3Aexplain"},
		{http.MethodPost, "/v1/./route:explain"}, {http.MethodHead, "/v1/endpoints"},
	} {
		if code, body, _ := rest(t, c.method, base+c.path, "", explainBody); code/100 == 2 || code/100 == 3 {
			t.Errorf("%s %s without the token: %d %s", c.method, c.path, code, body)
		}
	}

	bearer := "Bearer " + operatorToken
	if _, err := tr.client.Explain(withAuth(bearer), &routerv1.RouteRequest{Model: "m"}); err != nil {
		t.Errorf("Explain with the token: %v", err)
	}
	if resp, err := tr.client.ListEndpoints(withAuth("bearer  "+operatorToken), &routerv1.ListEndpointsRequest{}); err != nil || len(resp.GetEndpoints()) != 1 {
		t.Errorf("ListEndpoints with the token: %v %v", resp, err)
	}
	if code, body, _ := rest(t, http.MethodPost, base+"/v1/route:explain", bearer, explainBody); code != 200 || !strings.Contains(body, `"candidates"`) {
		t.Errorf("REST explain with the token: %d %s", code, body)
	}
	if code, body, _ := rest(t, http.MethodGet, base+"/v1/endpoints?model=m", bearer, ""); code != 200 || !strings.Contains(body, w.URL()) {
		t.Errorf("REST endpoints with the token: %d %s", code, body)
	}
	if _, err := tr.client.Route(context.Background(), &routerv1.RouteRequest{RequestId: "r1", Model: "m"}); err != nil {
		t.Errorf("Route without a token: %v", err)
	}
}

// TestOperatorDefault: with no way to tell an operator, Explain is served
// on a loopback listener only; ListEndpoints stays open.
func TestOperatorDefault(t *testing.T) {
	w := newFakeWorker(t, "m")
	tr := startRouter(t, func(c *router.Config) { c.GRPCAddr, c.HTTPAddr = "0.0.0.0:0", "0.0.0.0:0" }, w)
	_, port, _ := strings.Cut(tr.srv.HTTPAddr(), "]:")
	if port == "" {
		_, port, _ = strings.Cut(tr.srv.HTTPAddr(), ":")
	}
	base := "http://127.0.0.1:" + port
	_, gport, _ := strings.Cut(strings.Replace(tr.srv.GRPCAddr(), "[::]", "0.0.0.0", 1), ":")
	conn, err := grpc.NewClient("127.0.0.1:"+gport, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := routerv1.NewRouterClient(conn)
	if _, err := c.Explain(context.Background(), &routerv1.RouteRequest{Model: "m"}); status.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), "--operator-token-file") {
		t.Errorf("Explain beyond loopback without a token configured: %v", err)
	}
	if code, body, _ := rest(t, http.MethodPost, base+"/v1/route:explain", "Bearer "+operatorToken, explainBody); code != http.StatusUnauthorized {
		t.Errorf("REST explain beyond loopback: %d %s", code, body)
	}
	if _, err := c.ListEndpoints(context.Background(), &routerv1.ListEndpointsRequest{}); err != nil {
		t.Errorf("ListEndpoints: %v", err)
	}
	if code, body, _ := rest(t, http.MethodGet, base+"/v1/endpoints", "", ""); code != 200 {
		t.Errorf("REST endpoints: %d %s", code, body)
	}

	// On loopback (every other test's router), Explain needs nothing.
	lo := startRouter(t, nil, w)
	if _, err := lo.client.Explain(context.Background(), &routerv1.RouteRequest{Model: "m"}); err != nil {
		t.Errorf("Explain on loopback: %v", err)
	}
}

func TestOperatorConfig(t *testing.T) {
	cfg := router.DefaultConfig()
	cfg.Endpoints = "a=http://127.0.0.1:1"
	cfg.OperatorTokenFile = tokenFile(t, "short")
	cfg.OperatorIdentities = "yardctl"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "operator-token-file") || !strings.Contains(err.Error(), "at least 16") ||
		!strings.Contains(err.Error(), "operator-identities") || !strings.Contains(err.Error(), "--grpc-tls-client-ca") {
		t.Fatalf("Validate: %v", err)
	}
	cfg.OperatorTokenFile = filepath.Join(t.TempDir(), "missing")
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "operator-token-file") {
		t.Fatalf("missing token file: %v", err)
	}
}

// TestExplainShowsNoOtherRequest: what Explain returns is about the request
// it is given and the workers' state; another tenant's request in flight
// (its id, tenant, prompt) appears nowhere in it, over gRPC or REST.
func TestExplainShowsNoOtherRequest(t *testing.T) {
	w := newFakeWorker(t, "m")
	tr := startRouter(t, nil, w)
	const secret = "zebra-quartz-private-contract-clause"
	other := &routerv1.RouteRequest{RequestId: "req-of-tenant-b-7731", Tenant: "tenant-b", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"` + secret + `"}]}`)}
	if _, err := tr.client.Route(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	resp, err := tr.client.Explain(context.Background(), &routerv1.RouteRequest{Tenant: "tenant-a", Model: "m", Api: routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS,
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := rest(t, http.MethodPost, "http://"+tr.srv.HTTPAddr()+"/v1/route:explain?tenant=tenant-a", "", explainBody)
	_, list, _ := rest(t, http.MethodGet, "http://"+tr.srv.HTTPAddr()+"/v1/endpoints", "", "")
	for _, answer := range []string{resp.String(), body, list} {
		for _, leak := range []string{"req-of-tenant-b", "tenant-b", secret} {
			if strings.Contains(answer, leak) {
				t.Errorf("an answer shows %q of another request:\n%s", leak, answer)
			}
		}
	}
	if resp.GetCandidates()[0].GetInFlight() != 1 {
		t.Errorf("the other request should count as load, nothing more: %v", resp.GetCandidates()[0])
	}
}
