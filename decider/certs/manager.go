package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Manager keeps the webhook's certificate in a Secret and its CA in the caBundle of
// every webhook of a MutatingWebhookConfiguration.
type Manager struct {
	Client        kubernetes.Interface
	Namespace     string
	SecretName    string
	WebhookConfig string // MutatingWebhookConfiguration name; empty skips caBundle
	DNSNames      []string
	CAValidity    time.Duration // default 10 years
	Validity      time.Duration // default 1 year
	RenewBefore   time.Duration // default a third of Validity
	Now           func() time.Time
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
	if m.RenewBefore == 0 {
		m.RenewBefore = m.Validity / 3
	}
	if m.Now == nil {
		m.Now = time.Now
	}
	if m.Log == nil {
		m.Log = zap.NewNop()
	}
	if m.Reloader == nil {
		m.Reloader = &Reloader{}
	}
}

// Sync makes sure the Secret holds a valid certificate (generating or rotating it),
// loads it into the Reloader and publishes the CA. It returns whether it rotated.
func (m *Manager) Sync(ctx context.Context) (rotated bool, err error) {
	m.defaults()
	now := m.Now()
	secrets := m.Client.CoreV1().Secrets(m.Namespace)
	sec, err := secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("certs: get secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	var b Bundle
	reason := "secret does not exist"
	var oldCA []byte
	if exists {
		if b, err = FromData(sec.Data); err != nil {
			reason = err.Error()
		} else {
			reason = b.NeedsRenewal(now, m.DNSNames, m.RenewBefore)
			oldCA = b.CACert
		}
	}
	if reason != "" {
		m.Log.Info("generating webhook certificate", zap.String("reason", reason))
		if b, err = Generate(now, m.DNSNames, m.CAValidity, m.Validity); err != nil {
			return false, err
		}
		data := b.Data()
		if oldCA != nil && caValidAt(oldCA, now) {
			// Pods still serving the previous certificate stay trusted until they reload.
			data["ca-previous.crt"] = oldCA
		}
		if exists {
			sec.Data, sec.Type = data, corev1.SecretTypeOpaque
			_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		} else {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: m.SecretName, Namespace: m.Namespace},
				Type:       corev1.SecretTypeOpaque,
				Data:       data,
			}, metav1.CreateOptions{})
		}
		if err != nil {
			// Another replica may have won the race; the next Sync reads its result.
			return false, fmt.Errorf("certs: write secret %s/%s: %w", m.Namespace, m.SecretName, err)
		}
		sec = &corev1.Secret{Data: data}
		rotated = true
	}
	if err := m.Reloader.Set(b.Cert, b.Key); err != nil {
		return rotated, err
	}
	bundle := append(append([]byte{}, b.CACert...), sec.Data["ca-previous.crt"]...)
	return rotated, m.publishCA(ctx, bundle)
}

func caValidAt(caPEM []byte, now time.Time) bool {
	blk, _ := pem.Decode(caPEM)
	if blk == nil {
		return false
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	return err == nil && now.Before(c.NotAfter)
}

func (m *Manager) publishCA(ctx context.Context, bundle []byte) error {
	if m.WebhookConfig == "" {
		return nil
	}
	hooks := m.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
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
		return fmt.Errorf("certs: update caBundle of %s: %w", m.WebhookConfig, err)
	}
	return nil
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
