// Package certs manages the webhook's TLS: a self-signed CA and a serving
// certificate for the webhook Service's DNS names, kept in a Secret, published as
// the MutatingWebhookConfiguration's caBundle, rotated before expiry and served
// through a hot-reloading tls.Config.GetCertificate. In cert-manager mode (Files)
// the certificate is only read from mounted files.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync/atomic"
	"time"
)

// Bundle is a CA and a serving certificate signed by it, in PEM.
type Bundle struct {
	CACert []byte
	CAKey  []byte
	Cert   []byte
	Key    []byte
}

// Secret data keys (the kubernetes.io/tls layout plus the CA).
const (
	KeyCert   = "tls.crt"
	KeyKey    = "tls.key"
	KeyCACert = "ca.crt"
	KeyCAKey  = "ca.key"
)

// Generate makes a CA valid for caValidity and a serving certificate for dnsNames
// (IP addresses become IP SANs) valid for validity, both starting at now (minus a minute for clock skew).
func Generate(now time.Time, dnsNames []string, caValidity, validity time.Duration) (Bundle, error) {
	if len(dnsNames) == 0 {
		return Bundle{}, errors.New("certs: no DNS names")
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Bundle{}, err
	}
	start := now.Add(-time.Minute)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "qas-webhook-ca"},
		NotBefore:             start,
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Bundle{}, fmt.Errorf("certs: CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Bundle{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		NotBefore:    start,
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range dnsNames {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	caCert, _ := x509.ParseCertificate(caDER)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Bundle{}, fmt.Errorf("certs: serving: %w", err)
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return Bundle{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{
		CACert: pemOf("CERTIFICATE", caDER),
		CAKey:  pemOf("EC PRIVATE KEY", caKeyDER),
		Cert:   pemOf("CERTIFICATE", der),
		Key:    pemOf("EC PRIVATE KEY", keyDER),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Data returns the bundle as Secret data.
func (b Bundle) Data() map[string][]byte {
	return map[string][]byte{KeyCert: b.Cert, KeyKey: b.Key, KeyCACert: b.CACert, KeyCAKey: b.CAKey}
}

// FromData reads a bundle from Secret data; missing keys give an error.
func FromData(d map[string][]byte) (Bundle, error) {
	b := Bundle{Cert: d[KeyCert], Key: d[KeyKey], CACert: d[KeyCACert], CAKey: d[KeyCAKey]}
	for k, v := range map[string][]byte{KeyCert: b.Cert, KeyKey: b.Key, KeyCACert: b.CACert} {
		if len(v) == 0 {
			return Bundle{}, fmt.Errorf("certs: secret has no %s", k)
		}
	}
	return b, nil
}

// NeedsRenewal reports why b must be regenerated at now: unparsable, not covering
// dnsNames, or expiring within renewBefore. It returns "" when b is still good.
func (b Bundle) NeedsRenewal(now time.Time, dnsNames []string, renewBefore time.Duration) string {
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		return "serving key pair unusable: " + err.Error()
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "serving certificate unparsable: " + err.Error()
	}
	for _, n := range dnsNames {
		if leaf.VerifyHostname(n) != nil {
			return "serving certificate does not cover " + n
		}
	}
	blk, _ := pem.Decode(b.CACert)
	if blk == nil {
		return "CA certificate unparsable"
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "CA certificate unparsable: " + err.Error()
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: dnsNames[0]}); err != nil {
		return "serving certificate does not verify against the CA: " + err.Error()
	}
	for _, exp := range []time.Time{leaf.NotAfter, ca.NotAfter} {
		if now.Add(renewBefore).After(exp) {
			return fmt.Sprintf("expires at %s, within %s", exp.UTC().Format(time.RFC3339), renewBefore)
		}
	}
	return ""
}

// Reloader holds the current serving certificate for tls.Config.GetCertificate.
type Reloader struct {
	cur atomic.Pointer[tls.Certificate]
}

// Set installs a new serving key pair; the next handshake uses it.
func (r *Reloader) Set(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certs: key pair: %w", err)
	}
	r.cur.Store(&pair)
	return nil
}

// GetCertificate returns the current certificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := r.cur.Load()
	if c == nil {
		return nil, errors.New("certs: no serving certificate yet")
	}
	return c, nil
}
