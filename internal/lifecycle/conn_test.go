package lifecycle

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/testkit"
)

func freePort(t *testing.T) int { return testkit.FreePort(t) }

func startNATS(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.NoLog, opts.NoSigs = "127.0.0.1", true, true
	if opts.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns
}

// TestDialNATSRidesOutAnOutage: a service starts while NATS is down, and
// connects by itself when it comes up.
func TestDialNATSRidesOutAnOutage(t *testing.T) {
	port := freePort(t)
	c, err := DialNATS(NATS{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}, "test", zerolog.Nop())
	if err != nil {
		t.Fatalf("dial while NATS is down: %v", err)
	}
	defer c.Close()
	if c.IsConnected() {
		t.Fatal("connected to nothing")
	}
	startNATS(t, &server.Options{Port: port})
	testkit.Eventually(t, 15*time.Second, "the connection once NATS is up", c.IsConnected)
	if err := c.Drain(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestDialNATSWithTLSAndNKey: mutual TLS with certificates the test makes,
// and NKey authentication; without the client certificate the server
// refuses.
func TestDialNATSWithTLSAndNKey(t *testing.T) {
	pki := newPKI(t)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: pki.serverCert, KeyFile: pki.serverKey, CaFile: pki.ca, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := startNATS(t, &server.Options{TLSConfig: tc, TLSVerify: true, TLS: true, Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	url := fmt.Sprintf("tls://127.0.0.1:%d", ns.Addr().(*net.TCPAddr).Port)

	good := NATS{URL: url, NKey: seedFile, TLS: TLS{CA: pki.ca, Cert: pki.clientCert, Key: pki.clientKey}}
	if err := good.Validate(true); err != nil {
		t.Fatal(err)
	}
	c, err := DialNATS(good, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testkit.Eventually(t, 10*time.Second, "a TLS and NKey connection", c.IsConnected)
	if err := c.Publish("x", []byte("y")); err != nil {
		t.Fatal(err)
	}

	noCert := NATS{URL: url, NKey: seedFile, TLS: TLS{CA: pki.ca}}
	c2, err := DialNATS(noCert, "test", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	time.Sleep(500 * time.Millisecond)
	if c2.IsConnected() {
		t.Error("connected without the client certificate the server requires")
	}
}

// TestOpenRedisTLS: rediss:// with the CA the test made, against a
// redis-server the test starts with TLS only; without the CA, the
// certificate is refused.
func TestOpenRedisTLS(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is required in CI")
		}
		t.Skip("SKIPPED: no redis-server on PATH to start with TLS")
	}
	pki := newPKI(t)
	port := freePort(t)
	cmd := exec.Command(bin, "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey, "--tls-ca-cert-file", pki.ca,
		"--tls-auth-clients", "optional", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	url := fmt.Sprintf("rediss://127.0.0.1:%d", port)
	rdb, err := OpenRedis(Redis{URL: url, TLS: TLS{CA: pki.ca}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	testkit.Eventually(t, 10*time.Second, "a PING over TLS", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err() == nil
	})

	untrusted, err := OpenRedis(Redis{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := untrusted.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("PING without the CA: %v, want a certificate error", err)
	}
}

// TestConnErrorsHideSecrets: settings that fail never print a password.
func TestConnErrorsHideSecrets(t *testing.T) {
	_, err := OpenRedis(Redis{URL: "redis://user:hunter2@127.0.0.1:notaport"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("OpenRedis error %v", err)
	}
	_, err = DialNATS(NATS{URL: "nats://user:hunter2@127.0.0.1:4", NKey: "/nonexistent/seed"}, "test", zerolog.Nop())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("DialNATS error %v", err)
	}
	_, err = DialNATS(NATS{URL: "nats://user:hunter2@127.0.0.1:4", TLS: TLS{CA: "/nonexistent/ca.pem"}}, "test", zerolog.Nop())
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "nats-tls-ca") {
		t.Errorf("DialNATS error %v", err)
	}
}

func TestNATSBackoff(t *testing.T) {
	want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := natsBackoff(i); got != w {
			t.Errorf("natsBackoff(%d) = %v, want %v", i, got, w)
		}
	}
}

// pki is a CA and a server and client certificate it signed, as files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchyard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := pki{ca: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, usage x509.ExtKeyUsage, serial int64) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", kder)
		return cert, keyFile
	}
	p.serverCert, p.serverKey = issue("server", x509.ExtKeyUsageServerAuth, 2)
	p.clientCert, p.clientKey = issue("client", x509.ExtKeyUsageClientAuth, 3)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRedisLogsAsJSON: a line go-redis logs itself (here, a dial that
// failed) comes out as a JSON line through zerolog, at warning level,
// instead of go-redis's plain text on stderr.
func TestRedisLogsAsJSON(t *testing.T) {
	var out testkit.SyncBuffer
	SetRedisLogger(zerolog.New(&out).Level(zerolog.InfoLevel))
	t.Cleanup(func() {
		logging.Enable()
		redis.SetLogLevel(logging.LogLevelError)
	})
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), DialerRetries: 1, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping to a closed port succeeded")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	found := false
	for _, l := range lines {
		var rec struct {
			Level, Component, Message string
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		if strings.Contains(rec.Message, "failed to dial") {
			found = true
			if rec.Level != "warn" || rec.Component != "redis" || strings.HasPrefix(rec.Message, "redis: ") {
				t.Errorf("go-redis line logged as %+v", rec)
			}
		}
	}
	if !found {
		t.Fatalf("no go-redis dial failure in the log: %q", out.String())
	}
}

// TestRedisLogLevels: go-redis's lines carry no level; they are warnings,
// recovered panics errors, and go-redis's own chatter debug lines.
func TestRedisLogLevels(t *testing.T) {
	for _, c := range []struct {
		chatty bool
		line   string
		want   string
	}{
		{false, "redis: connection pool: failed to dial after 5 attempts: refused", "warn"},
		{false, "conn[3] marked for handoff", "warn"},
		{false, "autopipeline: recovered dispatch panic: boom", "error"},
		{true, "conn[3] marked for handoff", "debug"},
		{true, "redis: failed to close connection: eof", "warn"},
	} {
		var out bytes.Buffer
		redisLogger{log: zerolog.New(&out), chatty: c.chatty}.Printf(context.Background(), "%s", c.line)
		var rec struct{ Level, Message string }
		if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
			t.Fatalf("%q: not JSON: %q", c.line, out.String())
		}
		if rec.Level != c.want {
			t.Errorf("%q (chatty %v): level %s, want %s", c.line, c.chatty, rec.Level, c.want)
		}
	}
}
