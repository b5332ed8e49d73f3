// Package discovery finds the pods to scrape: pods carrying the sidecar injector's
// label (the webhook sets it on every pod it injects, also those that opted in by
// annotation), with their node, their workload (resolved through the ReplicaSet owner
// to the Deployment) and their CPU requests and limits, from informers on the API
// server.
package discovery

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// Pod is one pod to scrape.
type Pod struct {
	scrape.Target
	// CPURequest and CPULimit in millicores, summed over containers; CPULimit is 0
	// when any container has no limit (the pod is then unbounded).
	CPURequest, CPULimit int64
}

// Discovery watches pods and ReplicaSets.
type Discovery struct {
	pods corelisters.PodLister
	rss  appslisters.ReplicaSetLister
	sync []cache.InformerSynced
}

// New registers the informers on a factory; call factory.Start and WaitForSync.
func New(factory informers.SharedInformerFactory) *Discovery {
	pi := factory.Core().V1().Pods()
	ri := factory.Apps().V1().ReplicaSets()
	return &Discovery{pods: pi.Lister(), rss: ri.Lister(), sync: []cache.InformerSynced{pi.Informer().HasSynced, ri.Informer().HasSynced}}
}

// NewFactory returns an informer factory whose pod informer only sees injected pods.
// Its ReplicaSet informer sees every ReplicaSet, since one whose pod template opts in
// by annotation carries no label, and keeps only their names and owners.
func NewFactory(client kubernetes.Interface, namespace string) informers.SharedInformerFactory {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTransform(slimReplicaSet))
	// Registered first, so that Core().V1().Pods() returns this filtered informer.
	f.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(c, namespace, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) { o.LabelSelector = sidecar.InjectLabel + "=" + sidecar.InjectValue })
	})
	return f
}

// slimReplicaSet keeps of a ReplicaSet what Workload reads (its owners), so that
// watching every ReplicaSet costs little memory.
func slimReplicaSet(obj any) (any, error) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok {
		return obj, nil
	}
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: rs.Name, Namespace: rs.Namespace, UID: rs.UID, ResourceVersion: rs.ResourceVersion,
		OwnerReferences: rs.OwnerReferences,
	}}, nil
}

// WaitForSync waits until the informers have listed everything once.
func (d *Discovery) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), d.sync...) {
		return fmt.Errorf("discovery: informers did not sync: %w", ctx.Err())
	}
	return nil
}

// Pods returns the running, injected pods with an IP, sorted by namespace and name.
// Pods it cannot scrape are left out; skipped says which and why.
func (d *Discovery) Pods() (pods []Pod, skipped map[string]string, err error) {
	sel := labels.SelectorFromSet(labels.Set{sidecar.InjectLabel: sidecar.InjectValue})
	all, err := d.pods.List(sel)
	if err != nil {
		return nil, nil, err
	}
	skipped = map[string]string{}
	for _, p := range all {
		key := p.Namespace + "/" + p.Name
		t, reason := d.target(p)
		if reason != "" {
			skipped[key] = reason
			continue
		}
		req, lim := CPU(p)
		pods = append(pods, Pod{Target: t, CPURequest: req, CPULimit: lim})
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Key() < pods[j].Key() })
	return pods, skipped, nil
}

func (d *Discovery) target(p *corev1.Pod) (scrape.Target, string) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return scrape.Target{}, "not running"
	}
	url := p.Annotations[sidecar.StatsURLAnnotation]
	if url == "" {
		if p.Status.PodIP == "" {
			return scrape.Target{}, "no pod IP"
		}
		port := sidecar.DefaultAdminPort
		if v, ok := p.Annotations[sidecar.AdminPortAnnotation]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return scrape.Target{}, fmt.Sprintf("annotation %s: %q is not a port", sidecar.AdminPortAnnotation, v)
			}
			port = n
		}
		url = "http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)) + "/stats"
	}
	if w := p.Labels[sidecar.FrontOfLabel]; w != "" {
		// A pooled workload's front (the decider's Deployment qas-front-<w>): its queue
		// counts toward workload w.
		return scrape.Target{Namespace: p.Namespace, Workload: w, Pod: p.Name, Node: p.Spec.NodeName, URL: url, Front: true}, ""
	}
	return scrape.Target{Namespace: p.Namespace, Workload: d.Workload(p), Pod: p.Name, Node: p.Spec.NodeName, URL: url}, ""
}

// Workload names the pod's workload: the Deployment owning its ReplicaSet, else the
// controlling owner's name (StatefulSet, ReplicaSet without a Deployment, ...), else
// the pod itself.
func (d *Discovery) Workload(p *corev1.Pod) string {
	owner := metav1.GetControllerOf(p)
	if owner == nil {
		return p.Name
	}
	if owner.Kind == "ReplicaSet" {
		if rs, err := d.rss.ReplicaSets(p.Namespace).Get(owner.Name); err == nil {
			if dep := metav1.GetControllerOf(rs); dep != nil && dep.Kind == "Deployment" {
				return dep.Name
			}
		}
	}
	return owner.Name
}

// CPU sums the containers' CPU requests and limits in millicores (the sidecar
// included: it shares the pod's cgroup). The limit is 0 when any container has none.
func CPU(p *corev1.Pod) (request, limit int64) {
	unlimited := false
	for _, c := range p.Spec.Containers {
		request += c.Resources.Requests.Cpu().MilliValue()
		l, ok := c.Resources.Limits[corev1.ResourceCPU]
		if !ok {
			unlimited = true
			continue
		}
		limit += l.MilliValue()
	}
	if unlimited {
		limit = 0
	}
	return request, limit
}
