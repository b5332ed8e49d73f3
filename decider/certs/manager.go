package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
)

// Manager keeps the webhook's certificate in a Secret and its CA in the caBundle of
// every webhook of a MutatingWebhookConfiguration. Several replicas may run one each:
// the Secret is the source of truth, written with optimistic concurrency, and a
// replica that loses a race adopts the winner's certificate.
type Manager struct {
	Client        kubernetes.Interface
	Namespace     string
	SecretName    string
	WebhookConfig string // MutatingWebhookConfiguration name; empty skips caBundle
	DNSNames      []string
	CAValidity    time.Duration      // default 10 years
	Validity      time.Duration      // default 1 year
	CARenewBefore time.Duration      // default a third of CAValidity
	RenewBefore   time.Duration      // default a third of Validity
	Clock         clock.PassiveClock // default the real clock
	Reloader      *Reloader
	Log           *zap.Logger
}

func (m *Manager) defaults() {
	if m.CAValidity == 0 {
		m.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if m.Validity == 0 {
		m.Validity = 365 * 24 * time.Hour
	}
	if m.CARenewBefore == 0 {
		m.CARenewBefore = m.CAValidity / 3
	}
	if m.RenewBefore == 0 {
		m.RenewBefore = m.Validity / 3
	}
	if m.Clock == nil {
		m.Clock = clock.RealClock{}
	}
	if m.Log == nil {
		m.Log = zap.NewNop()
	}
	if m.Reloader == nil {
		m.Reloader = &Reloader{}
	}
}

// maxWriteAttempts bounds how often Sync re-reads the Secret after losing a write race.
const maxWriteAttempts = 5

// Sync makes sure the Secret holds a good bundle (creating or renewing it, see Plan),
// publishes its CAs in the caBundle, and then serves its certificate. It returns
// whether it changed the Secret.
func (m *Manager) Sync(ctx context.Context) (rotated bool, err error) {
	m.defaults()
	now := m.Clock.Now()
	lt := Lifetimes{CAValidity: m.CAValidity, Validity: m.Validity, CARenewBefore: m.CARenewBefore, RenewBefore: m.RenewBefore}
	secrets := m.Client.CoreV1().Secrets(m.Namespace)
	var b Bundle
	for attempt := 1; ; attempt++ {
		sec, err := secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
		exists := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("certs: get secret %s/%s: %w", m.Namespace, m.SecretName, err)
		}
		var cur Bundle
		if exists {
			cur = FromData(sec.Data)
		}
		next, reason, err := Plan(cur, now, m.DNSNames, lt)
		if err != nil {
			return false, err
		}
		if reason == "" {
			b = cur
			break
		}
		m.Log.Info("renewing webhook certificate", zap.String("reason", reason))
		if exists {
			sec.Data, sec.Type = next.Data(), corev1.SecretTypeOpaque
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		} else {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: m.SecretName, Namespace: m.Namespace},
				Type:       corev1.SecretTypeOpaque,
				Data:       next.Data(),
			}, metav1.CreateOptions{})
		}
		if err == nil {
			b, rotated = next, true
			break
		}
		if (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) && attempt < maxWriteAttempts {
			// Another replica wrote first: its bundle is the one to use. Read it again.
			continue
		}
		return false, fmt.Errorf("certs: write secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	// The caBundle first: with it in place the apiserver already trusts the CA of
	// what is served next (and the cross-certificate covers an apiserver that is late).
	if err := m.publishCA(ctx, b.CABundle(now)); err != nil {
		return rotated, err
	}
	return rotated, m.Reloader.Set(b.Cert, b.Key)
}

func (m *Manager) publishCA(ctx context.Context, bundle []byte) error {
	if m.WebhookConfig == "" {
		return nil
	}
	hooks := m.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	// Other replicas publish the same bundle (from the same Secret) and may race.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := hooks.Get(ctx, m.WebhookConfig, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("certs: get MutatingWebhookConfiguration %s: %w", m.WebhookConfig, err)
		}
		changed := false
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if _, err := hooks.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("certs: update caBundle of %s: %w", m.WebhookConfig, err)
		}
		return nil
	})
}

// Run calls Sync now and then on every tick until ctx ends. Pass a ticker's channel
// (production: time.NewTicker(time.Hour).C); errors are logged and retried next tick.
func (m *Manager) Run(ctx context.Context, tick <-chan time.Time) error {
	m.defaults()
	if _, err := m.Sync(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if _, err := m.Sync(ctx); err != nil {
				m.Log.Error("certificate sync failed", zap.Error(err))
			}
		}
	}
}

// LoadFiles loads a mounted key pair (cert-manager mode) into r. Call it on every
// tick: cert-manager rewrites the files when it renews, and this picks them up.
func LoadFiles(r *Reloader, certFile, keyFile string) error {
	c, err := os.ReadFile(certFile)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return r.Set(c, k)
}
