package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvroute/kvroute/internal/testkit/caddytest"
)

// siteTLS is the certificate of the simulator harness's TLS site: a test CA and a 127.0.0.1
// leaf it signed, written as PEM files for the site's `tls <cert> <key>`, and the pool holding
// the CA that the harness's clients trust. Caddyfile.example terminates TLS with a certificate
// Caddy manages; a loaded certificate goes through the same TLS app, connection policies and
// handshake, and is ready when the config is loaded (no background issuance to wait for), so
// every Caddy of a test — in process, reloaded, or a second process (caddybin) — serves it.
type siteTLS struct {
	certFile, keyFile string
	roots             *x509.CertPool
}

// newSiteTLS generates a CA and a leaf for 127.0.0.1 (ECDSA P-256, valid for a day) into a
// folder of the test.
func newSiteTLS(t testing.TB) siteTLS {
	t.Helper()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kvroute test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := siteTLS{certFile: filepath.Join(dir, "site.crt"), keyFile: filepath.Join(dir, "site.key"), roots: x509.NewCertPool()}
	// the chain the server sends: leaf, then CA
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(s.certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	s.roots.AddCert(caCert)
	return s
}

// client is the harness's HTTP client: the default transport's settings (HTTP/1.1 keep-alive,
// transparent gzip) over TLS trusting only the test CA, HTTP/1.1 as the OpenAI SDKs speak it,
// and RetryReset for the reload race (caddytest/retry.go). Plain http:// URLs (the admin
// endpoint) go through the same client.
func (s siteTLS) client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: s.roots, NextProtos: []string{"http/1.1"}}
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return &http.Client{Timeout: 60 * time.Second, Transport: caddytest.RetryReset{Base: tr}}
}
