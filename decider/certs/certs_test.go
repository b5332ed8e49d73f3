package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(certPEM)
	require.NotNil(t, blk)
	c, err := x509.ParseCertificate(blk.Bytes)
	require.NoError(t, err)
	return c
}

func TestNeedsRenewal(t *testing.T) {
	names := []string{"qas-webhook.qas.svc", "127.0.0.1"}
	b, err := Generate(t0, names, 240*time.Hour, 24*time.Hour)
	require.NoError(t, err)
	other, err := Generate(t0, names, 240*time.Hour, 24*time.Hour)
	require.NoError(t, err)
	mixed := b
	mixed.CACert = other.CACert
	for _, tc := range []struct {
		name  string
		b     Bundle
		now   time.Time
		names []string
		want  string
	}{
		{"fresh", b, t0, names, ""},
		{"before renew window", b, t0.Add(15 * time.Hour), names, ""},
		{"inside renew window", b, t0.Add(17 * time.Hour), names, "expires at 2026-11-23T12:00:00Z, within 8h0m0s"},
		{"expired", b, t0.Add(25 * time.Hour), names, "does not verify against the CA"},
		{"new DNS name", b, t0, append(names, "qas-webhook.other.svc"), "does not cover qas-webhook.other.svc"},
		{"foreign CA", mixed, t0, names, "does not verify against the CA"},
		{"garbage", Bundle{Cert: []byte("x"), Key: []byte("y")}, t0, names, "serving key pair unusable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.b.NeedsRenewal(tc.now, tc.names, 8*time.Hour)
			if tc.want == "" {
				require.Empty(t, got)
			} else {
				require.Contains(t, got, tc.want)
			}
		})
	}
	leaf := leafOf(t, b.Cert)
	require.Equal(t, []string{"qas-webhook.qas.svc"}, leaf.DNSNames)
	require.Equal(t, "127.0.0.1", leaf.IPAddresses[0].String())
	_, err = Generate(t0, nil, time.Hour, time.Hour)
	require.ErrorContains(t, err, "no DNS names")
}

func TestFromDataMissingKey(t *testing.T) {
	_, err := FromData(map[string][]byte{KeyCert: []byte("c"), KeyKey: []byte("k")})
	require.EqualError(t, err, "certs: secret has no ca.crt")
}

// TestManagerRotatesWithoutSleeping drives rotation by moving an injected clock.
func TestManagerRotatesWithoutSleeping(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset(&admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "qas"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "inject.qas.dev"}, {Name: "other.qas.dev"}},
	})
	now := t0
	m := &Manager{
		Client: client, Namespace: "qas", SecretName: "qas-webhook-tls", WebhookConfig: "qas",
		DNSNames: []string{"qas-webhook.qas.svc"}, CAValidity: 30 * 24 * time.Hour, Validity: 24 * time.Hour,
		RenewBefore: 8 * time.Hour, Now: func() time.Time { return now },
	}
	caBundle := func() [][]byte {
		cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "qas", metav1.GetOptions{})
		require.NoError(t, err)
		var out [][]byte
		for _, h := range cfg.Webhooks {
			out = append(out, h.ClientConfig.CABundle)
		}
		return out
	}
	served := func() *x509.Certificate {
		c, err := m.Reloader.GetCertificate(nil)
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		require.NoError(t, err)
		return leaf
	}

	rotated, err := m.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated, "first sync creates the secret")
	first := served()
	sec, err := client.CoreV1().Secrets("qas").Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, caBundle(), [][]byte{sec.Data[KeyCACert], sec.Data[KeyCACert]})

	now = t0.Add(15 * time.Hour)
	rotated, err = m.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated, "outside the renew window nothing changes")
	require.Equal(t, first.SerialNumber, served().SerialNumber)

	now = t0.Add(17 * time.Hour)
	rotated, err = m.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated, "inside the renew window the certificate rotates")
	second := served()
	require.NotEqual(t, first.SerialNumber, second.SerialNumber)
	require.True(t, second.NotAfter.Equal(now.Add(24*time.Hour).Truncate(time.Second)))
	sec2, err := client.CoreV1().Secrets("qas").Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
	require.NoError(t, err)
	bundle := caBundle()[0]
	require.True(t, strings.HasPrefix(string(bundle), string(sec2.Data[KeyCACert])), "new CA first")
	require.Contains(t, string(bundle), string(sec.Data[KeyCACert]), "previous CA still trusted during rollover")

	// A second replica with the same Secret loads the same certificate without rotating.
	m2 := *m
	m2.Reloader = nil
	rotated, err = m2.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated)
	c2, err := m2.Reloader.GetCertificate(nil)
	require.NoError(t, err)
	l2, _ := x509.ParseCertificate(c2.Certificate[0])
	require.Equal(t, second.SerialNumber, l2.SerialNumber)
}

func TestManagerMissingWebhookConfig(t *testing.T) {
	m := &Manager{Client: fake.NewSimpleClientset(), Namespace: "qas", SecretName: "s", WebhookConfig: "absent", DNSNames: []string{"a"}}
	_, err := m.Sync(context.Background())
	require.ErrorContains(t, err, "get MutatingWebhookConfiguration absent")
}

// TestReloaderHotSwap checks that a TLS server picks up a new certificate on the next
// handshake.
func TestReloaderHotSwap(t *testing.T) {
	r := &Reloader{}
	_, err := r.GetCertificate(nil)
	require.ErrorContains(t, err, "no serving certificate yet")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate})
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "https://" + ln.Addr().String()
	get := func(ca []byte) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	now := time.Now()
	a, err := Generate(now, []string{"127.0.0.1"}, time.Hour, time.Hour)
	require.NoError(t, err)
	b, err := Generate(now, []string{"127.0.0.1"}, time.Hour, time.Hour)
	require.NoError(t, err)
	require.NoError(t, r.Set(a.Cert, a.Key))
	require.NoError(t, get(a.CACert))
	require.Error(t, get(b.CACert))
	require.NoError(t, r.Set(b.Cert, b.Key))
	require.NoError(t, get(b.CACert))
	require.Error(t, get(a.CACert))

	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(cf, a.Cert, 0o600))
	require.NoError(t, os.WriteFile(kf, a.Key, 0o600))
	require.NoError(t, LoadFiles(r, cf, kf))
	require.NoError(t, get(a.CACert))
	require.ErrorContains(t, LoadFiles(r, filepath.Join(dir, "missing"), kf), "no such file")
	require.ErrorContains(t, r.Set([]byte("bad"), a.Key), "certs: key pair")
}
