package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// CA is a certificate authority made by a test: its certificate and the
// certificates it issues are PEM files in a temporary directory.
type CA struct {
	// File is the CA certificate's PEM file.
	File string

	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

// NewCA makes a CA named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	c := &CA{dir: tb.TempDir(), cert: cert, key: key, serial: 1}
	c.File = c.write(tb, name+"-ca.pem", "CERTIFICATE", der)
	return c
}

// Server issues a server certificate for localhost and 127.0.0.1 (and
// names), returning its certificate and key files.
func (c *CA) Server(tb testing.TB, names ...string) (certFile, keyFile string) {
	tb.Helper()
	return c.issue(tb, "server", append([]string{"localhost"}, names...), x509.ExtKeyUsageServerAuth)
}

// Client issues a client certificate with common name cn (also its DNS
// name), returning its certificate and key files.
func (c *CA) Client(tb testing.TB, cn string) (certFile, keyFile string) {
	tb.Helper()
	return c.issue(tb, cn, []string{cn}, x509.ExtKeyUsageClientAuth)
}

func (c *CA) issue(tb testing.TB, cn string, dns []string, usage x509.ExtKeyUsage) (string, string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	c.mu.Lock()
	c.serial++
	serial := c.serial
	c.mu.Unlock()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: dns, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	base := cn + "-" + strconv.FormatInt(serial, 10)
	return c.write(tb, base+".pem", "CERTIFICATE", der), c.write(tb, base+"-key.pem", "EC PRIVATE KEY", kder)
}

func (c *CA) write(tb testing.TB, name, typ string, der []byte) string {
	tb.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}
