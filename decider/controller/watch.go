package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
)

// watches are the controller's informers and what they trigger. Pods, nodes,
// PersistentVolumeClaims and PersistentVolumes are read from caches; QueueAutoscalers
// and targets are read from the API server (their scale and the engine's memory must
// be current; the QueueAutoscalers' cache only names those a cycle goes through), but
// watched, so that a change is decided on without waiting for the next cycle:
//   - a QueueAutoscaler created or whose spec changed: at once;
//   - one of its pods turning Ready or not Ready, or deleted: after EventDelay;
//   - its target created, deleted or changed (generation; kubectl scale is one):
//     after EventDelay, through a metadata-only informer per target resource,
//     when the decider may list and watch that resource.
//
// Keys wait in a delaying work queue, which coalesces a key queued again before it
// is due; Run takes them one at a time.
type watches struct {
	started atomic.Bool
	log     *zap.Logger
	delay   time.Duration

	pods    corelisters.PodLister
	nodes   corelisters.NodeLister
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	ready   *resources.ReadyTracker
	qas     cache.Store // the QueueAutoscalers, for the names a cycle goes through

	queue  workqueue.TypedDelayingInterface[string]
	queued chan string

	mu        sync.Mutex
	deps      map[string]dependency // by QueueAutoscaler key
	orphans   map[string]*v1alpha1.QueueAutoscaler
	informers Informers
	watched   map[schema.GroupVersionResource]bool
	stop      <-chan struct{}
}

// dependency is what one QueueAutoscaler's reconcile reads: its target and the pods
// the target's selector picks.
type dependency struct {
	namespace string
	selector  labels.Selector
	resource  schema.GroupResource
	name      string
}

// SyncTimeout bounds how long Start waits for the informer caches.
const SyncTimeout = 2 * time.Minute

// Start starts the informers and waits until their caches are filled; they run
// until ctx ends. A cache that cannot fill (typically: RBAC refuses list or watch)
// fails Start with an error naming it.
func (c *Controller) Start(ctx context.Context) error {
	w := c.watch
	if w.started.Load() || w.queue == nil || w.informers.Core == nil || w.informers.QueueAutoscalers == nil || w.informers.Targets == nil {
		return errors.New("controller: Start called twice, or on a Controller not built by New")
	}
	if c.EventDelay > 0 {
		w.delay = c.EventDelay
	}
	factory := w.informers.Core
	core := factory.Core().V1()
	podInf := core.Pods().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if p, ok := obj.(*corev1.Pod); ok {
				w.ready.Observe(p, !initial)
				if !initial && resources.IsReady(p) {
					w.podChanged(p)
				}
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Pod)
			p, ok2 := obj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			w.ready.Observe(p, false)
			if resources.IsReady(o) != resources.IsReady(p) {
				w.podChanged(p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := tombstone(obj).(*corev1.Pod); ok {
				w.ready.Forget(p.UID)
				w.podChanged(p)
			}
		},
	}); err != nil {
		return err
	}
	w.pods = core.Pods().Lister()
	w.nodes = core.Nodes().Lister()
	w.claims = core.PersistentVolumeClaims().Lister()
	w.volumes = core.PersistentVolumes().Lister()
	synced := map[string]cache.InformerSynced{
		"pods":                   podInf.HasSynced,
		"nodes":                  core.Nodes().Informer().HasSynced,
		"persistentvolumeclaims": core.PersistentVolumeClaims().Informer().HasSynced,
		"persistentvolumes":      core.PersistentVolumes().Informer().HasSynced,
	}

	qaFactory := w.informers.QueueAutoscalers
	qaInf := qaFactory.ForResource(GVR).Informer()
	if _, err := qaInf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if u, ok := obj.(*unstructured.Unstructured); ok && !initial {
				w.queue.Add(key(u.GetNamespace(), u.GetName()))
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			u, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetGeneration() != u.GetGeneration() {
				w.queue.Add(key(u.GetNamespace(), u.GetName()))
			}
		},
		DeleteFunc: func(obj any) {
			if u, ok := tombstone(obj).(*unstructured.Unstructured); ok {
				w.deleted(u)
			}
		},
	}); err != nil {
		return err
	}
	synced["queueautoscalers"] = qaInf.HasSynced
	w.qas = qaInf.GetStore()

	w.stop = ctx.Done()
	factory.Start(ctx.Done())
	qaFactory.Start(ctx.Done())
	go func() { <-ctx.Done(); w.queue.ShutDown() }()

	sctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	for name, ok := range synced {
		if !cache.WaitForCacheSync(sctx.Done(), ok) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the %s cache did not fill within %s: can the decider list and watch %s?", name, SyncTimeout, name)
		}
	}
	go w.pump(ctx)
	w.started.Store(true)
	return nil
}

// Queued delivers the keys ("namespace/name") of QueueAutoscalers the watches ask
// to reconcile.
func (c *Controller) Queued() <-chan string { return c.watch.queued }

// pump hands queued keys to Queued's reader, one at a time.
func (w *watches) pump(ctx context.Context) {
	for {
		k, quit := w.queue.Get()
		if quit {
			return
		}
		select {
		case w.queued <- k:
		case <-ctx.Done():
		}
		w.queue.Done(k)
	}
}

func key(ns, name string) string { return ns + "/" + name }

// tombstone unwraps the last known state of an object deleted while the watch was
// down.
func tombstone(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// podChanged queues the QueueAutoscalers whose target selects p.
func (w *watches) podChanged(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := labels.Set(p.Labels)
	for k, d := range w.deps {
		if d.namespace == p.Namespace && d.selector.Matches(set) {
			w.queue.AddAfter(k, w.delay)
		}
	}
}

// targetChanged queues the QueueAutoscalers that scale the object.
func (w *watches) targetChanged(gr schema.GroupResource, ns, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, d := range w.deps {
		if d.resource == gr && d.namespace == ns && d.name == name {
			w.queue.AddAfter(k, w.delay)
		}
	}
}

// deleted forgets a deleted QueueAutoscaler. One deleted in the middle of a
// migration is kept until the leader, reconciling the key, aborts that migration:
// nothing else would remove its node's taint.
func (w *watches) deleted(u *unstructured.Unstructured) {
	k := key(u.GetNamespace(), u.GetName())
	w.mu.Lock()
	delete(w.deps, k)
	if u.GetAnnotations()[MigrationAnnotation] != "" {
		var qa v1alpha1.QueueAutoscaler
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &qa); err == nil {
			w.orphans[k] = &qa
		}
	}
	w.mu.Unlock()
	w.queue.Add(k)
}

// forget handles the reconcile of a QueueAutoscaler that no longer exists.
func (c *Controller) forget(ctx context.Context, k string) error {
	w := c.watch
	w.mu.Lock()
	delete(w.deps, k)
	orphan := w.orphans[k]
	delete(w.orphans, k)
	w.mu.Unlock()
	if orphan == nil {
		return nil
	}
	return c.abortStored(ctx, orphan, "its QueueAutoscaler was deleted")
}

// track records what qa's reconcile depends on and makes sure its target's resource
// is watched.
func (w *watches) track(ctx context.Context, c *Controller, qa *v1alpha1.QueueAutoscaler, t target) {
	w.mu.Lock()
	w.deps[key(qa.Namespace, qa.Name)] = dependency{namespace: qa.Namespace, selector: t.selector, resource: t.resource.GroupResource(), name: qa.Spec.ScaleTargetRef.Name}
	_, known := w.watched[t.resource]
	w.mu.Unlock()
	if !known {
		w.watchTargets(ctx, c, t.resource)
	}
}

// watchTargets starts a metadata-only informer on a target resource, when RBAC lets
// the decider list and watch it (the shipped role covers Deployments, StatefulSets
// and ReplicaSets; other scalable kinds need a rule of their own). Without, changes
// of such targets are seen at the next cycle, which reads the scale subresource
// anyway.
func (w *watches) watchTargets(ctx context.Context, c *Controller, gvr schema.GroupVersionResource) {
	allowed, err := c.mayWatch(ctx, gvr)
	if err != nil {
		w.log.Warn("cannot tell whether the decider may watch targets; they are read each cycle only", zap.String("resource", gvr.String()), zap.Error(err))
		return // asked again at the next reconcile
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, known := w.watched[gvr]; known {
		return
	}
	w.watched[gvr] = allowed
	if !allowed {
		w.log.Info("targets of this kind are read each cycle only: grant list and watch on it for prompt reaction to its changes", zap.String("resource", gvr.String()))
		return
	}
	gr := gvr.GroupResource()
	inf := w.informers.Targets.ForResource(gvr).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok && !initial {
				w.targetChanged(gr, m.Namespace, m.Name)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*metav1.PartialObjectMetadata)
			m, ok2 := obj.(*metav1.PartialObjectMetadata)
			if ok1 && ok2 && o.Generation != m.Generation {
				w.targetChanged(gr, m.Namespace, m.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if m, ok := tombstone(obj).(*metav1.PartialObjectMetadata); ok {
				w.targetChanged(gr, m.Namespace, m.Name)
			}
		},
	}); err != nil {
		w.log.Warn("cannot watch targets", zap.String("resource", gvr.String()), zap.Error(err))
		return
	}
	w.informers.Targets.Start(w.stop)
}

// mayWatch asks the API server whether the decider may list and watch gvr in every
// namespace.
func (c *Controller) mayWatch(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
	for _, verb := range []string{"list", "watch"} {
		r, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Verb: verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}
