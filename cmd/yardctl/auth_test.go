package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// TestTokenAndTLS: yardctl sends the operator token from --token-file (or
// SWITCHYARD_TOKEN_FILE) and speaks mutual TLS to an https:// router with
// --tls-ca, --tls-cert and --tls-key; a router refusing it is explained.
func TestTokenAndTLS(t *testing.T) {
	answer, err := os.ReadFile(filepath.Join("testdata", "router", "endpoints.json"))
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef0123456789abcdef"
	ca := testkit.NewCA(t, "switchyard")
	srvCert, srvKey := ca.Server(t)
	cliCert, cliKey := ca.Client(t, "operator")
	pair, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca.File)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":16,"message":"ListEndpoints needs the operator role"}`))
			return
		}
		_, _ = w.Write(answer)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--tls-ca", ca.File, "--tls-cert", cliCert, "--tls-key", cliKey}

	args := append([]string{"endpoints", "-o", "json", "--router", srv.URL, "--token-file", tok}, tlsArgs...)
	if code, out, errOut := runCLI(t, "", args...); code != 0 || !strings.Contains(out, `"endpoints"`) {
		t.Fatalf("with token and certificate: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("SWITCHYARD_TOKEN_FILE", tok)
	if code, out, errOut := runCLI(t, "", append([]string{"endpoints", "-o", "json", "--router", srv.URL}, tlsArgs...)...); code != 0 {
		t.Fatalf("token from the environment: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("SWITCHYARD_TOKEN_FILE", "")
	if code, _, errOut := runCLI(t, "", append([]string{"endpoints", "--router", srv.URL}, tlsArgs...)...); code != 1 ||
		!strings.Contains(errOut, "401 Unauthorized: ListEndpoints needs the operator role (give the router's operator token with --token-file)") {
		t.Fatalf("without the token: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "", "endpoints", "--router", srv.URL, "--token-file", tok, "--tls-ca", ca.File); code != 1 ||
		!strings.Contains(errOut, "certificate") {
		t.Fatalf("without a client certificate: exit %d\n%s", code, errOut)
	}
}
