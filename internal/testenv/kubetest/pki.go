package kubetest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate and its private key.
type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newCA makes a self-signed certificate authority valid for a day: long enough for any
// test run, short enough that a leaked file is worthless.
func newCA(cn string) (keyPair, error) {
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

// issue signs a leaf certificate for cn with the given usages and subject alternative names.
func (ca keyPair) issue(cn string, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) (keyPair, error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	return sign(tmpl, &ca)
}

// sign makes a fresh P-256 key and a certificate for it from tmpl, signed by parent,
// or self-signed when parent is nil.
func sign(tmpl *x509.Certificate, parent *keyPair) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	parentCert, parentKey := tmpl, crypto.Signer(key)
	if parent != nil {
		parentCert, parentKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, key.Public(), parentKey)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key}, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

// write stores the pair as name.crt and name.key in dir.
func (kp keyPair) write(dir, name string) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", kp.cert.Raw); err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(kp.key)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".key"), "PRIVATE KEY", der)
}

// certPEM returns the certificate in PEM form (for caBundle fields and kubeconfigs).
func (kp keyPair) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kp.cert.Raw})
}

// writeServiceAccountKeys writes the RSA key pair the apiserver signs and verifies
// service-account tokens with.
func writeServiceAccountKeys(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, "sa.key"), "PRIVATE KEY", der); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub)
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
