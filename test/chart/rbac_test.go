package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// TestChartRBAC applies the chart's RBAC to a real apiserver and asks it, with
// SubjectAccessReviews, what the collector's and webhook's ServiceAccounts may do:
// exactly what the binaries use (collector/discovery and collector/cpu; decider/certs),
// and not more; and that the decider's leader election reaches only its own Lease.
// (The decider's rules are config/rbac's, which decider/e2e checks against the calls a
// full run makes; TestInstallDecideUninstall runs the decider under the chart's.)
func TestChartRBAC(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := newHelm(t)
	h.kubeconfig = c.Kubeconfig
	if out, err := h.run("install", "rbac", chartDir(t), "--namespace", ns, "--skip-crds",
		"-f", valuesFile(t, "tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]\ninfluxdb: {internal: {persistence: {enabled: false}}}")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = h.run("uninstall", "rbac", "--namespace", ns) })
	collector := "system:serviceaccount:" + ns + ":rbac-qas-collector"
	webhook := "system:serviceaccount:" + ns + ":rbac-qas-webhook"
	decider := "system:serviceaccount:" + ns + ":rbac-qas-decider"
	cases := []struct {
		user                                   string
		verb, group, resource, namespace, name string
		allowed                                bool
	}{
		{collector, "list", "", "pods", "", "", true},
		{collector, "watch", "", "pods", "other", "", true},
		{collector, "list", "apps", "replicasets", "", "", true},
		{collector, "watch", "apps", "replicasets", "", "", true},
		{collector, "list", "", "nodes", "", "", true},
		{collector, "list", "metrics.k8s.io", "pods", "", "", true},
		{collector, "list", "metrics.k8s.io", "nodes", "", "", true},
		{collector, "get", "", "secrets", ns, "rbac-qas-webhook-tls", false},
		{collector, "create", "", "pods", "default", "", false},
		{collector, "delete", "", "pods", "default", "x", false},
		{collector, "update", "apps", "deployments", "default", "x", false},
		{collector, "patch", "", "nodes", "", "n", false},
		{webhook, "get", "", "secrets", ns, "rbac-qas-webhook-tls", true},
		{webhook, "update", "", "secrets", ns, "rbac-qas-webhook-tls", true},
		{webhook, "get", "", "secrets", ns, "rbac-qas-other", false},
		{webhook, "list", "", "secrets", ns, "", false},
		{webhook, "get", "", "secrets", "default", "rbac-qas-webhook-tls", false},
		{webhook, "get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "rbac-qas-inject", true},
		{webhook, "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "rbac-qas-inject", true},
		{webhook, "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "someone-elses", false},
		{webhook, "create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", false},
		{webhook, "list", "", "pods", "", "", false},
		// Pooling: which pods belong to a workload with routing: pooled.
		{webhook, "list", "qas.dev", "queueautoscalers", "", "", true},
		{webhook, "watch", "qas.dev", "queueautoscalers", "", "", true},
		{webhook, "update", "qas.dev", "queueautoscalers", "default", "x", false},
		{webhook, "get", "apps", "replicasets", "default", "web-7d9", true},
		{webhook, "list", "apps", "replicasets", "", "", false},
		{webhook, "get", "apps", "deployments", "default", "web", false},
		// The decider's pooling objects (config/rbac, checked against a full run by
		// decider/e2e): by name, never listed.
		{decider, "create", "apps", "deployments", "default", "", true},
		{decider, "get", "", "secrets", "default", "qas-pooling-web", true},
		{decider, "list", "", "secrets", "default", "", false},
		{decider, "create", "rbac.authorization.k8s.io", "roles", "default", "", true},
		{decider, "bind", "rbac.authorization.k8s.io", "roles", "default", "x", false},
		{decider, "escalate", "rbac.authorization.k8s.io", "roles", "default", "x", false},
		{decider, "create", "rbac.authorization.k8s.io", "clusterroles", "", "", false},
		{decider, "list", "discovery.k8s.io", "endpointslices", "default", "", true},
		{decider, "create", "discovery.k8s.io", "endpointslices", "default", "", false},
		{decider, "get", "coordination.k8s.io", "leases", ns, "rbac-qas-decider", true},
		{decider, "update", "coordination.k8s.io", "leases", ns, "rbac-qas-decider", true},
		{decider, "create", "coordination.k8s.io", "leases", ns, "", true},
		{decider, "update", "coordination.k8s.io", "leases", ns, "someone-elses", false},
		{decider, "get", "coordination.k8s.io", "leases", "kube-system", "kube-scheduler", false},
		{decider, "update", "coordination.k8s.io", "leases", "kube-system", "kube-controller-manager", false},
		{decider, "create", "coordination.k8s.io", "leases", "kube-system", "", false},
		{decider, "list", "coordination.k8s.io", "leases", ns, "", false},
		{decider, "create", "", "events", "default", "", true},
		{decider, "create", "events.k8s.io", "events", "default", "", false},
		{decider, "update", "qas.dev", "queueautoscalers/status", "default", "x", true},
		{decider, "patch", "qas.dev", "queueautoscalers/status", "default", "x", false},
		{decider, "get", "qas.dev", "queueautoscalers/status", "default", "x", false},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s %s %s.%s %s/%s", tc.user[len("system:serviceaccount:")+len(ns)+1:], tc.verb, tc.resource, tc.group, tc.namespace, tc.name)
		t.Run(name, func(t *testing.T) {
			resource, subresource, _ := strings.Cut(tc.resource, "/")
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   tc.user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: tc.verb, Group: tc.group, Resource: resource, Subresource: subresource, Namespace: tc.namespace, Name: tc.name,
				},
			}}
			got, err := c.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%s)", got.Status.Allowed, tc.allowed, got.Status.Reason)
			}
		})
	}
}
