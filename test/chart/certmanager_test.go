package chart

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// certManagerValues install the chart in cert-manager mode on kwok's nodes, without an
// InfluxDB volume (the control plane has no provisioner).
const certManagerValues = `
tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
influxdb: {internal: {persistence: {enabled: false}}}
webhook: {certManager: {enabled: true}}
`

// TestCertManagerSecretGoesWithTheRelease: in cert-manager mode the chart creates the
// Secret the Certificate fills, because cert-manager leaves it behind otherwise. On a
// real control plane, with cert-manager's CRDs and its issuing controller played by
// exactly the server-side apply it makes (field manager, forced, type
// kubernetes.io/tls, the three keys), upgrades keep the certificate (also after a
// renewal) without conflicting with cert-manager's ownership of the data, and
// uninstall leaves nothing behind.
func TestCertManagerSecretGoesWithTheRelease(t *testing.T) {
	c := kubetest.Shared(t)
	cs := c.Clientset()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, name := range []string{"certificates.cert-manager.io", "issuers.cert-manager.io"} {
		if err := c.InstallCRD(ctx, filepath.Join("testdata", name+".yaml")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dyn.Resource(crds).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	ns := c.Namespace(t)
	rel := installRelease(ctx, t, c, ns, certManagerValues)
	const secret = "rel-qas-webhook-cert"
	issue := func(serial string) map[string][]byte {
		t.Helper()
		crt, key := selfSigned(t, "rel-qas-webhook.svc "+serial)
		data := map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": crt}
		apply := applycorev1.Secret(secret, ns).WithType(corev1.SecretTypeTLS).WithData(data).
			WithAnnotations(map[string]string{"cert-manager.io/certificate-name": "rel-qas-webhook"}).
			WithLabels(map[string]string{"controller.cert-manager.io/fao": "true"})
		if _, err := cs.CoreV1().Secrets(ns).Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "cert-manager-certificates-issuing", Force: true}); err != nil {
			t.Fatalf("cert-manager's apply to the chart's Secret: %v", err)
		}
		return data
	}
	upgradeKeeps := func(data map[string][]byte, interval string) {
		t.Helper()
		rel.upgrade(t, "--set", "decider.interval="+interval)
		got, err := cs.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Type != corev1.SecretTypeTLS || len(got.Data) != len(data) {
			t.Fatalf("after helm upgrade: type %q, keys %v", got.Type, keys(got.Data))
		}
		for k, v := range data {
			if !bytes.Equal(got.Data[k], v) {
				t.Errorf("helm upgrade changed %s: %q, want %q", k, got.Data[k], v)
			}
		}
	}
	upgradeKeeps(issue("1"), "20s")
	upgradeKeeps(issue("2"), "25s") // a renewal, then another upgrade

	rel.uninstall(ctx, t, keptCRD)
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{}); err == nil {
		t.Errorf("Secret %s survived helm uninstall", secret)
	}
}

// selfSigned returns a PEM certificate and key, as an Issuer would issue them.
func selfSigned(t *testing.T, cn string) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
