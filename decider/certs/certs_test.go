package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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

var (
	names = []string{"qas-webhook.qas.svc", "127.0.0.1"}
	life  = Lifetimes{CAValidity: 30 * 24 * time.Hour, Validity: 24 * time.Hour, CARenewBefore: 10 * 24 * time.Hour, RenewBefore: 8 * time.Hour}
)

// verifies reports whether the serving chain in b (leaf plus intermediates) verifies
// for host at now against a caBundle, as the apiserver verifies the webhook.
func verifies(t *testing.T, b Bundle, caBundle []byte, now time.Time) error {
	t.Helper()
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caBundle))
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		require.NoError(t, err)
		inter.AddCert(c)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now, DNSName: "127.0.0.1"})
	return err
}

func TestPlan(t *testing.T) {
	good, err := Generate(t0, names, life.CAValidity, life.Validity)
	require.NoError(t, err)
	other, err := Generate(t0, names, life.CAValidity, life.Validity)
	require.NoError(t, err)
	foreign := good
	foreign.Cert, foreign.Key = other.Cert, other.Key
	noKey := good
	noKey.CAKey = nil
	for _, tc := range []struct {
		name     string
		b        Bundle
		now      time.Time
		names    []string
		reason   string // "" = unchanged
		sameCA   bool
		rollover bool
	}{
		{"fresh", good, t0, names, "", true, false},
		{"before the renew window", good, t0.Add(15 * time.Hour), names, "", true, false},
		{"serving certificate in its renew window", good, t0.Add(17 * time.Hour), names, "serving certificate expires at 2026-11-23T12:00:00Z, within 8h0m0s", true, false},
		{"serving certificate expired", good, t0.Add(25 * time.Hour), names, "does not verify against the CA", true, false},
		{"new DNS name", good, t0, append(names, "qas-webhook.other.svc"), "does not cover qas-webhook.other.svc", true, false},
		{"serving certificate of another CA", foreign, t0, names, "does not verify against the CA", true, false},
		{"garbage serving pair", Bundle{CACert: good.CACert, CAKey: good.CAKey, Cert: []byte("x"), Key: []byte("y")}, t0, names, "serving key pair unusable", true, false},
		{"CA in its renew window", good, t0.Add(21 * 24 * time.Hour), names, "CA expires at 2026-12-22T12:00:00Z, within 240h0m0s", false, true},
		{"empty secret", Bundle{}, t0, names, "no usable CA: certificate missing or not PEM", false, false},
		{"CA without key", noKey, t0, names, "no usable CA: CA key missing or not PEM", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := Plan(tc.b, tc.now, tc.names, life)
			require.NoError(t, err)
			if tc.reason == "" {
				require.Empty(t, reason)
				require.Equal(t, tc.b, got)
				return
			}
			require.Contains(t, reason, tc.reason)
			require.Equal(t, tc.sameCA, string(got.CACert) == string(tc.b.CACert), "CA kept")
			_, again, err := Plan(got, tc.now, tc.names, life)
			require.NoError(t, err)
			require.Empty(t, again, "the planned bundle is good")
			require.NoError(t, verifies(t, got, got.CABundle(tc.now), tc.now))
			if tc.rollover {
				require.Equal(t, tc.b.CACert, got.PreviousCA)
				require.NotEmpty(t, got.Cross)
			} else {
				require.Empty(t, got.Cross)
			}
		})
	}
	leaf := leafOf(t, good.Cert)
	require.Equal(t, []string{"qas-webhook.qas.svc"}, leaf.DNSNames)
	require.Equal(t, "127.0.0.1", leaf.IPAddresses[0].String())
	_, _, err = Plan(good, t0, nil, life)
	require.ErrorContains(t, err, "no DNS names")
}

// TestCARolloverHasNoGap: whichever caBundle the apiserver holds at the moment (the
// old one, not yet reloaded, or the new one) it verifies both what a replica serves
// after the rollover and what a replica that has not reloaded yet still serves; once
// the previous CA expires it leaves the bundle and the chain.
func TestCARolloverHasNoGap(t *testing.T) {
	old, err := Generate(t0, names, life.CAValidity, life.Validity)
	require.NoError(t, err)
	now := t0.Add(20*24*time.Hour + time.Hour)
	// The serving certificate was renewed meanwhile (same CA), as it is every 16 h, and
	// is still valid when the CA rolls over.
	renewed, reason, err := Plan(old, now.Add(-12*time.Hour), names, life)
	require.NoError(t, err)
	require.Contains(t, reason, "serving certificate")
	require.Equal(t, old.CACert, renewed.CACert)
	old = renewed
	oldBundle := old.CABundle(now)
	next, reason, err := Plan(old, now, names, life)
	require.NoError(t, err)
	require.Contains(t, reason, "CA expires")
	require.Equal(t, old.CACert, next.PreviousCA)
	newBundle := next.CABundle(now)
	require.NotEqual(t, oldBundle, newBundle)
	for _, tc := range []struct {
		name     string
		served   Bundle
		caBundle []byte
	}{
		{"new certificate, old caBundle", next, oldBundle},
		{"new certificate, new caBundle", next, newBundle},
		{"old certificate, old caBundle", old, oldBundle},
		{"old certificate, new caBundle", old, newBundle},
	} {
		require.NoError(t, verifies(t, tc.served, tc.caBundle, now), tc.name)
	}
	// Without the cross-certificate the new certificate would fail against the old
	// caBundle: the gap this closes.
	bare := next
	bare.Cert = firstPEM(next.Cert)
	require.Error(t, verifies(t, bare, oldBundle, now))

	// The serving certificate renewed again before the previous CA expires keeps the
	// cross-certificate; after it expires, the previous CA and the cross go.
	later := now.Add(17 * time.Hour)
	renewed, reason, err = Plan(next, later, names, life)
	require.NoError(t, err)
	require.Contains(t, reason, "serving certificate expires")
	require.NoError(t, verifies(t, renewed, oldBundle, later))
	expired := leafOf(t, old.CACert).NotAfter.Add(time.Hour)
	final, reason, err := Plan(renewed, expired, names, life)
	require.NoError(t, err)
	require.Contains(t, reason, "previous CA expired")
	require.Empty(t, final.PreviousCA)
	require.Empty(t, final.Cross)
	require.Equal(t, final.CACert, final.CABundle(expired))
	require.NoError(t, verifies(t, final, final.CABundle(expired), expired))
}

// pointerClock reads the time a test moves by hand.
type pointerClock struct{ t *time.Time }

func (c pointerClock) Now() time.Time                  { return *c.t }
func (c pointerClock) Since(t time.Time) time.Duration { return c.t.Sub(t) }

func newManager(client *fake.Clientset, now *time.Time) *Manager {
	return &Manager{
		Client: client, Namespace: "qas", SecretName: "qas-webhook-tls", WebhookConfig: "qas",
		DNSNames: names, CAValidity: life.CAValidity, Validity: life.Validity,
		CARenewBefore: life.CARenewBefore, RenewBefore: life.RenewBefore, Clock: pointerClock{now},
	}
}

func webhookConfig() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "qas"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "inject.qas.dev"}, {Name: "other.qas.dev"}},
	}
}

func servedLeaf(t *testing.T, r *Reloader) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(nil)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	require.NoError(t, err)
	return leaf
}

// TestManagerRenewsWithoutSleeping drives renewal by moving an injected clock: the
// serving certificate is renewed under the same CA (the caBundle stays), and the CA
// rolls over with both CAs published.
func TestManagerRenewsWithoutSleeping(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(webhookConfig())
	now := t0
	m := newManager(client, &now)
	caBundle := func() [][]byte {
		cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "qas", metav1.GetOptions{})
		require.NoError(t, err)
		var out [][]byte
		for _, h := range cfg.Webhooks {
			out = append(out, h.ClientConfig.CABundle)
		}
		return out
	}
	secret := func() map[string][]byte {
		sec, err := client.CoreV1().Secrets("qas").Get(ctx, "qas-webhook-tls", metav1.GetOptions{})
		require.NoError(t, err)
		return sec.Data
	}

	rotated, err := m.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated, "first sync creates the secret")
	first := servedLeaf(t, m.Reloader)
	ca := secret()[KeyCACert]
	require.Equal(t, [][]byte{ca, ca}, caBundle())

	now = t0.Add(15 * time.Hour)
	rotated, err = m.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated, "outside the renew window nothing changes")
	require.Equal(t, first.SerialNumber, servedLeaf(t, m.Reloader).SerialNumber)

	now = t0.Add(17 * time.Hour)
	rotated, err = m.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated, "inside the renew window the serving certificate is renewed")
	second := servedLeaf(t, m.Reloader)
	require.NotEqual(t, first.SerialNumber, second.SerialNumber)
	require.True(t, second.NotAfter.Equal(now.Add(24*time.Hour).Truncate(time.Second)))
	require.Equal(t, ca, secret()[KeyCACert], "same CA")
	require.Equal(t, [][]byte{ca, ca}, caBundle(), "caBundle unchanged")

	now = t0.Add(21 * 24 * time.Hour)
	rotated, err = m.Sync(ctx)
	require.NoError(t, err)
	require.True(t, rotated, "the CA rolls over inside its renew window")
	data := secret()
	require.NotEqual(t, ca, data[KeyCACert])
	require.Equal(t, ca, data[KeyPreviousCA])
	both := append(append([]byte{}, data[KeyCACert]...), ca...)
	require.Equal(t, [][]byte{both, both}, caBundle(), "new CA first, the previous one still trusted")
	c, err := m.Reloader.GetCertificate(nil)
	require.NoError(t, err)
	require.Len(t, c.Certificate, 2, "served with the cross-certificate")

	// A second replica with the same Secret serves the same certificate without
	// renewing anything.
	m2 := newManager(client, &now)
	rotated, err = m2.Sync(ctx)
	require.NoError(t, err)
	require.False(t, rotated)
	require.Equal(t, servedLeaf(t, m.Reloader).SerialNumber, servedLeaf(t, m2.Reloader).SerialNumber)
}

// TestManagerLosesWriteRace: two replicas renew at once; the one whose write conflicts
// adopts what the other wrote instead of failing or serving its own.
func TestManagerLosesWriteRace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing bool // the Secret exists (the chart creates it empty) or not
	}{{"update conflicts", true}, {"create finds it exists", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			objs := []runtime.Object{webhookConfig()}
			if tc.existing {
				objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "qas-webhook-tls", Namespace: "qas"}})
			}
			client := fake.NewClientset(objs...)
			now := t0
			winner, err := Generate(now, names, life.CAValidity, life.Validity)
			require.NoError(t, err)
			raced := false
			// The other replica's write lands between this one's read and write.
			client.PrependReactor("*", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if raced || (a.GetVerb() != "update" && a.GetVerb() != "create") {
					return false, nil, nil
				}
				raced = true
				sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "qas-webhook-tls", Namespace: "qas"}, Data: winner.Data()}
				gr := corev1.Resource("secrets")
				if tc.existing {
					require.NoError(t, client.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), sec, "qas"))
					return true, nil, apierrors.NewConflict(gr, sec.Name, errors.New("the object has been modified"))
				}
				require.NoError(t, client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("secrets"), sec, "qas"))
				return true, nil, apierrors.NewAlreadyExists(gr, sec.Name)
			})
			m := newManager(client, &now)
			rotated, err := m.Sync(ctx)
			require.NoError(t, err)
			require.False(t, rotated, "the other replica wrote it")
			require.True(t, raced)
			require.Equal(t, leafOf(t, winner.Cert).SerialNumber, servedLeaf(t, m.Reloader).SerialNumber)
			cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "qas", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, winner.CACert, cfg.Webhooks[0].ClientConfig.CABundle)
		})
	}
}

func TestManagerMissingWebhookConfig(t *testing.T) {
	m := &Manager{Client: fake.NewClientset(), Namespace: "qas", SecretName: "s", WebhookConfig: "absent", DNSNames: []string{"a"}}
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
	go func() { _ = srv.Serve(ln) }()
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
