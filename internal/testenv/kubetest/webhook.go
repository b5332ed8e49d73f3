package kubetest

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RegisterPodWebhook creates the MutatingWebhookConfiguration name with the one webhook
// hook, called for every pod created in namespace ns, and deletes it when t ends. The
// caller gives what tells webhooks apart (hook's Name, ClientConfig, FailurePolicy and
// ObjectSelector); RegisterPodWebhook sets the rest: the pod CREATE rule, the namespace
// selector, no side effects and AdmissionReview v1. The apiserver takes the
// configuration into its admission chain asynchronously, so the first pods may still
// miss the webhook.
func (c *Cluster) RegisterPodWebhook(t testing.TB, ns, name string, hook admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	hook.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	hook.SideEffects = &none
	hook.AdmissionReviewVersions = []string{"v1"}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{hook},
	}
	configs := c.clientset.AdmissionregistrationV1().MutatingWebhookConfigurations()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := configs.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create MutatingWebhookConfiguration %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = configs.Delete(ctx, name, metav1.DeleteOptions{})
	})
}
