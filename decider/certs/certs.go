// Package certs manages the webhook's TLS: a self-signed CA and a serving
// certificate for the webhook Service's DNS names, kept in a Secret (the one source of
// truth for every webhook replica), published as the MutatingWebhookConfiguration's
// caBundle, renewed before expiry and served through a hot-reloading
// tls.Config.GetCertificate. In cert-manager mode (LoadFiles) the certificate is only
// read from mounted files.
//
// Renewal never leaves a moment in which the apiserver cannot verify what a replica
// serves, whatever order the apiserver and the replicas pick up the changes in:
//   - the serving certificate is renewed with the same CA, so the caBundle does not
//     change;
//   - the CA itself is renewed only when it nears its own expiry: the new CA is
//     cross-signed by the old one and the serving certificate is sent with that
//     cross-certificate, so it verifies against the old caBundle as well as the new;
//     the old CA stays in the caBundle while it is valid, so a replica still serving
//     its previous certificate is trusted too.
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
	"strings"
	"sync/atomic"
	"time"
)

// Bundle is the webhook's certificate state, in PEM: the CA that signs serving
// certificates, the serving certificate and key, and during a CA rollover the previous
// CA and the cross-certificate of the current CA signed by it.
type Bundle struct {
	CACert []byte
	CAKey  []byte
	// Cert is the serving certificate, followed by Cross when there is one.
	Cert []byte
	Key  []byte
	// PreviousCA is the CA this one replaced; it stays in the caBundle while valid.
	PreviousCA []byte
	// Cross is the current CA's certificate issued by PreviousCA.
	Cross []byte
}

// Secret data keys (the kubernetes.io/tls layout plus the CAs).
const (
	KeyCert       = "tls.crt"
	KeyKey        = "tls.key"
	KeyCACert     = "ca.crt"
	KeyCAKey      = "ca.key"
	KeyPreviousCA = "ca-previous.crt"
	KeyCross      = "ca-cross.crt"
)

// Data returns the bundle as Secret data.
func (b Bundle) Data() map[string][]byte {
	d := map[string][]byte{KeyCert: b.Cert, KeyKey: b.Key, KeyCACert: b.CACert, KeyCAKey: b.CAKey}
	if len(b.PreviousCA) > 0 {
		d[KeyPreviousCA] = b.PreviousCA
	}
	if len(b.Cross) > 0 {
		d[KeyCross] = b.Cross
	}
	return d
}

// FromData reads a bundle from Secret data as it is; Plan judges whether it is usable.
func FromData(d map[string][]byte) Bundle {
	return Bundle{Cert: d[KeyCert], Key: d[KeyKey], CACert: d[KeyCACert], CAKey: d[KeyCAKey],
		PreviousCA: d[KeyPreviousCA], Cross: d[KeyCross]}
}

// CABundle is what the apiserver must trust: the current CA and, while it is valid at
// now, the previous one.
func (b Bundle) CABundle(now time.Time) []byte {
	out := append([]byte{}, b.CACert...)
	if prev, err := parseCert(b.PreviousCA); err == nil && now.Before(prev.NotAfter) {
		out = append(out, b.PreviousCA...)
	}
	return out
}

// Lifetimes sets how long certificates live and when they are renewed.
type Lifetimes struct {
	CAValidity, Validity       time.Duration
	CARenewBefore, RenewBefore time.Duration
}

// Plan returns the bundle to use at now for dnsNames (IP addresses become IP SANs),
// and why it differs from b ("" when b is good as it is):
//   - no usable CA (a new Secret): a new CA and serving certificate;
//   - the CA expires within CARenewBefore: a new CA, cross-signed by the old one, and a
//     serving certificate from it;
//   - the serving certificate is unusable, does not cover dnsNames or expires within
//     RenewBefore: a new one from the same CA;
//   - the previous CA has expired: it and its cross-certificate are dropped.
func Plan(b Bundle, now time.Time, dnsNames []string, l Lifetimes) (Bundle, string, error) {
	if len(dnsNames) == 0 {
		return Bundle{}, "", errors.New("certs: no DNS names")
	}
	ca, caErr := loadCA(b.CACert, b.CAKey)
	if caErr != nil {
		fresh, err := Generate(now, dnsNames, l.CAValidity, l.Validity)
		return fresh, "no usable CA: " + caErr.Error(), err
	}
	if !now.Add(l.CARenewBefore).Before(ca.cert.NotAfter) {
		next, err := rolloverCA(ca, now, dnsNames, l)
		return next, fmt.Sprintf("CA expires at %s, within %s", ca.cert.NotAfter.UTC().Format(time.RFC3339), l.CARenewBefore), err
	}
	out := b
	var reasons []string
	if prev, err := parseCert(b.PreviousCA); len(b.PreviousCA) > 0 && (err != nil || !now.Before(prev.NotAfter)) {
		out.PreviousCA, out.Cross = nil, nil
		out.Cert = firstPEM(b.Cert)
		reasons = append(reasons, "previous CA expired")
	}
	if why := leafProblem(b, ca.cert, now, dnsNames, l.RenewBefore); why != "" {
		leaf, key, err := issueLeaf(ca, now, dnsNames, l.Validity)
		if err != nil {
			return Bundle{}, "", err
		}
		out.Cert, out.Key = append(leaf, out.Cross...), key
		reasons = append(reasons, why)
	}
	return out, strings.Join(reasons, "; "), nil
}

// leafProblem says why the serving certificate in b must be reissued by ca.
func leafProblem(b Bundle, ca *x509.Certificate, now time.Time, dnsNames []string, renewBefore time.Duration) string {
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
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: dnsNames[0]}); err != nil {
		return "serving certificate does not verify against the CA: " + err.Error()
	}
	if !now.Add(renewBefore).Before(leaf.NotAfter) {
		return fmt.Sprintf("serving certificate expires at %s, within %s", leaf.NotAfter.UTC().Format(time.RFC3339), renewBefore)
	}
	return ""
}

type keyedCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

func loadCA(certPEM, keyPEM []byte) (keyedCA, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return keyedCA{}, err
	}
	blk, _ := pem.Decode(keyPEM)
	if blk == nil {
		return keyedCA{}, errors.New("CA key missing or not PEM")
	}
	key, err := x509.ParseECPrivateKey(blk.Bytes)
	if err != nil {
		return keyedCA{}, fmt.Errorf("CA key: %w", err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return keyedCA{}, errors.New("CA certificate and key do not match")
	}
	return keyedCA{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	blk, _ := pem.Decode(certPEM)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New("certificate missing or not PEM")
	}
	return x509.ParseCertificate(blk.Bytes)
}

func firstPEM(chain []byte) []byte {
	blk, _ := pem.Decode(chain)
	if blk == nil {
		return chain
	}
	return pem.EncodeToMemory(blk)
}

// Generate makes a CA valid for caValidity and a serving certificate from it for
// dnsNames (IP addresses become IP SANs) valid for validity, both starting at now (minus
// a minute for clock skew).
func Generate(now time.Time, dnsNames []string, caValidity, validity time.Duration) (Bundle, error) {
	if len(dnsNames) == 0 {
		return Bundle{}, errors.New("certs: no DNS names")
	}
	ca, err := newCA(now, caValidity, nil)
	if err != nil {
		return Bundle{}, err
	}
	leaf, key, err := issueLeaf(ca, now, dnsNames, validity)
	if err != nil {
		return Bundle{}, err
	}
	return Bundle{CACert: ca.certPEM, CAKey: ca.keyPEM, Cert: leaf, Key: key}, nil
}

// rolloverCA replaces old with a new CA: the cross-certificate (the new CA issued by
// old) lets a serving certificate of the new CA verify against a caBundle that holds
// only old.
func rolloverCA(old keyedCA, now time.Time, dnsNames []string, l Lifetimes) (Bundle, error) {
	next, err := newCA(now, l.CAValidity, nil)
	if err != nil {
		return Bundle{}, err
	}
	leaf, key, err := issueLeaf(next, now, dnsNames, l.Validity)
	if err != nil {
		return Bundle{}, err
	}
	b := Bundle{CACert: next.certPEM, CAKey: next.keyPEM, Cert: leaf, Key: key}
	if !now.Before(old.cert.NotAfter) {
		return b, nil // the old CA verifies nothing any more; nothing to bridge
	}
	cross, err := newCA(now, l.CAValidity, &crossSign{issuer: old, subject: next})
	if err != nil {
		return Bundle{}, err
	}
	b.PreviousCA, b.Cross = old.certPEM, cross.certPEM
	b.Cert = append(b.Cert, cross.certPEM...)
	return b, nil
}

type crossSign struct{ issuer, subject keyedCA }

// newCA makes a self-signed CA, or with cross the certificate of cross.subject's key
// and name issued by cross.issuer (valid no longer than the issuer).
func newCA(now time.Time, validity time.Duration, cross *crossSign) (keyedCA, error) {
	start := now.Add(-time.Minute)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		NotBefore:             start,
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	var key *ecdsa.PrivateKey
	parent, signer := tmpl, (*ecdsa.PrivateKey)(nil)
	if cross == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return keyedCA{}, err
		}
		// A name per CA, so that chains through a cross-certificate are unambiguous.
		tmpl.Subject = pkix.Name{CommonName: "qas-webhook-ca", SerialNumber: tmpl.SerialNumber.Text(16)}
		signer = key
	} else {
		key = cross.subject.key
		tmpl.Subject = cross.subject.cert.Subject
		tmpl.SubjectKeyId = cross.subject.cert.SubjectKeyId
		tmpl.NotAfter = earliest(cross.subject.cert.NotAfter, cross.issuer.cert.NotAfter)
		parent, signer = cross.issuer.cert, cross.issuer.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return keyedCA{}, fmt.Errorf("certs: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return keyedCA{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyedCA{}, err
	}
	return keyedCA{cert: cert, key: key, certPEM: pemOf("CERTIFICATE", der), keyPEM: pemOf("EC PRIVATE KEY", keyDER)}, nil
}

// issueLeaf makes a serving certificate for dnsNames from ca, valid for validity but
// never beyond the CA.
func issueLeaf(ca keyedCA, now time.Time, dnsNames []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     earliest(now.Add(validity), ca.cert.NotAfter),
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: serving: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemOf("CERTIFICATE", der), pemOf("EC PRIVATE KEY", keyDER), nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Reloader holds the current serving certificate for tls.Config.GetCertificate.
type Reloader struct {
	cur atomic.Pointer[tls.Certificate]
}

// Set installs a new serving key pair (certPEM may carry intermediates after the
// leaf, which are sent with it); the next handshake uses it.
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
