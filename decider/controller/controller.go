// Package controller is qas-decider's control loop: for each QueueAutoscaler it builds
// the decision engine's snapshot from the Kubernetes API and the collector's
// measurements, runs the engine, acts (scale subresource, in-place pod resize), and
// records every decision in the resource's status, an Event, the log and a sink.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// StateAnnotation holds the engine's memory (stabilisation window, rate-limit budget) on
// the QueueAutoscaler, so that a restarted or newly elected decider continues where the
// last one stopped instead of repeating or undoing its actions.
const StateAnnotation = "qas.dev/engine-state"

// Measurement is what the proxies and nodes measured for one workload over the window.
type Measurement struct {
	ArrivalRates    []decide.Sample
	ServiceTime     float64 // seconds
	ServiceSCV      float64
	ArrivalSCV      float64
	MeasuredLatency float64 // seconds, at the target percentile (or the mean)
	Pods            map[string]PodUsage
	Nodes           map[string]NodeUsage
	// DataTime is when the newest measurement was taken; Complete is true when every
	// pod and node had data.
	DataTime time.Time
	Complete bool
}

// WorkloadQuery names what to measure.
type WorkloadQuery struct {
	Namespace, Workload string
	// Pods are the workload's current pods, Ready the subset that is Ready: the pods
	// whose data must be present for the measurement to be complete.
	Pods, Ready []string
	Nodes       []string
	// NeedNodes is true when the decision uses node CPU (vertical or migration
	// enabled); node data then counts towards completeness.
	NeedNodes  bool
	Now        time.Time
	Percentile float64
}

// MetricsSource supplies measurements; the collector's store implements it.
type MetricsSource interface {
	Measure(ctx context.Context, q WorkloadQuery) (Measurement, error)
}

// DecisionSink stores decisions for dashboards (InfluxDB); it may be nil.
type DecisionSink interface {
	RecordDecision(ctx context.Context, namespace, name string, d decide.Decision, dryRun bool) error
}

// Controller reconciles QueueAutoscalers.
type Controller struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Scales   scale.ScalesGetter
	Mapper   meta.RESTMapper
	Metrics  MetricsSource
	Sink     DecisionSink
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Log      *zap.Logger
	// InitSamples bounds the pod start-time samples kept per workload (default 20).
	InitSamples int
	// DryRun makes every QueueAutoscaler dry-run: decisions are computed and recorded
	// but nothing is changed, whatever the resources' own spec.dryRun says.
	DryRun bool
	// MigrationTimeout aborts a migration whose replacement is not Ready (or whose
	// disruption budget allows nothing) by then; default 5 min.
	MigrationTimeout time.Duration
	// ResizeDeferredLimit is how long a resize may stay Deferred before the engine
	// falls back to migration or horizontal scaling; default 2 min.
	ResizeDeferredLimit time.Duration
	// ResizeBackoff is how long vertical scaling stays off after a resize was
	// Infeasible or Deferred too long; default 10 min.
	ResizeBackoff time.Duration
}

// dryRun reports whether qa's decisions must only be recorded.
func (c *Controller) dryRun(qa *v1alpha1.QueueAutoscaler) bool { return c.DryRun || qa.Spec.DryRun }

// GVR is the QueueAutoscaler resource.
var GVR = v1alpha1.GroupVersion.WithResource(v1alpha1.Resource)

// Reconcile runs one decision cycle for the QueueAutoscaler ns/name. A spec the engine
// cannot use is reported in the status condition and an Event, not retried.
func (c *Controller) Reconcile(ctx context.Context, ns, name string) (decide.Decision, error) {
	obj, err := c.Dynamic.Resource(GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return decide.Decision{}, err
	}
	var qa v1alpha1.QueueAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &qa); err != nil {
		return decide.Decision{}, fmt.Errorf("decode %s/%s: %w", ns, name, err)
	}
	now := c.Clock.Now()
	spec, err := qa.Spec.DecideSpec()
	if err != nil {
		c.Recorder.Event(&qa, corev1.EventTypeWarning, "InvalidSpec", err.Error())
		return decide.Decision{}, c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
			setCondition(st, "Ready", metav1.ConditionFalse, "InvalidSpec", err.Error(), qa.Generation, now)
		})
	}
	target, err := c.resolveTarget(ctx, &qa)
	if err != nil {
		c.Recorder.Event(&qa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		_ = c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
			setCondition(st, "AbleToScale", metav1.ConditionFalse, "FailedGetScale", err.Error(), qa.Generation, now)
		})
		return decide.Decision{}, err
	}
	if busy, err := c.continueMigration(ctx, &qa, &target, now); busy || err != nil {
		return decide.Decision{}, err
	}
	snap, pods, err := c.snapshot(ctx, &qa, spec, target, now)
	if err != nil {
		return decide.Decision{}, err
	}
	if spec.Vertical.Enabled {
		blocked, err := c.resizeFollowThrough(ctx, &qa, pods, now)
		if err != nil {
			return decide.Decision{}, err
		}
		snap.ResizeBlocked = blocked
	}
	engine, err := engineFromAnnotation(qa.Annotations[StateAnnotation])
	if err != nil {
		c.Log.Warn("discarding unreadable engine state", zap.String("queueautoscaler", ns+"/"+name), zap.Error(err))
		engine = decide.NewEngine()
	}
	d, err := engine.Decide(spec, snap)
	if err != nil {
		return decide.Decision{}, fmt.Errorf("decide %s/%s: %w", ns, name, err)
	}
	actErr := error(nil)
	if !c.dryRun(&qa) {
		actErr = c.act(ctx, &qa, target, d)
		if actErr != nil {
			engine.Revert(d)
			c.Recorder.Event(&qa, corev1.EventTypeWarning, "FailedAction", actErr.Error())
		}
	}
	if err := c.saveEngine(ctx, &qa, engine); err != nil {
		return d, err
	}
	c.report(ctx, &qa, d, actErr)
	if err := c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
		fillStatus(st, &qa, d, snap, target, actErr, c.dryRun(&qa), now)
	}); err != nil {
		return d, err
	}
	return d, actErr
}

// target is the scaled workload as seen through its scale subresource.
type target struct {
	resource schema.GroupResource
	replicas int32
	selector labels.Selector
}

func (c *Controller) resolveTarget(ctx context.Context, qa *v1alpha1.QueueAutoscaler) (target, error) {
	ref := qa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return target{}, fmt.Errorf("scaleTargetRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	mapping, err := c.Mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return target{}, fmt.Errorf("scaleTargetRef %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	gr := mapping.Resource.GroupResource()
	sc, err := c.Scales.Scales(qa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
	if err != nil {
		return target{}, fmt.Errorf("get scale of %s %s: %w", ref.Kind, ref.Name, err)
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil || sc.Status.Selector == "" {
		return target{}, fmt.Errorf("%s %s has no usable pod selector in its scale status (%q)", ref.Kind, ref.Name, sc.Status.Selector)
	}
	return target{resource: gr, replicas: sc.Spec.Replicas, selector: sel}, nil
}

// snapshot builds the engine's input; it also returns the workload's pods.
func (c *Controller) snapshot(ctx context.Context, qa *v1alpha1.QueueAutoscaler, spec decide.Spec, t target, now time.Time) (decide.Snapshot, []corev1.Pod, error) {
	podList, err := c.Kube.CoreV1().Pods(qa.Namespace).List(ctx, metav1.ListOptions{LabelSelector: t.selector.String()})
	if err != nil {
		return decide.Snapshot{}, nil, fmt.Errorf("list pods: %w", err)
	}
	nodeList, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return decide.Snapshot{}, nil, fmt.Errorf("list nodes: %w", err)
	}
	var allPods []corev1.Pod
	if spec.Migration.Enabled || spec.Vertical.Enabled {
		// Node room and neighbours matter only to the resize and migration levers.
		all, err := c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return decide.Snapshot{}, nil, fmt.Errorf("list pods on nodes: %w", err)
		}
		allPods = all.Items
	}
	q := WorkloadQuery{Namespace: qa.Namespace, Workload: qa.Spec.ScaleTargetRef.Name, Now: now, Percentile: spec.Percentile,
		NeedNodes: spec.Migration.Enabled || spec.Vertical.Enabled}
	owned := map[string]bool{}
	var ready int32
	for i := range podList.Items {
		p := &podList.Items[i]
		owned[p.Namespace+"/"+p.Name] = true
		q.Pods = append(q.Pods, p.Name)
		if IsReady(p) {
			ready++
			q.Ready = append(q.Ready, p.Name)
		}
	}
	for _, n := range nodeList.Items {
		q.Nodes = append(q.Nodes, n.Name)
	}
	m, err := c.Metrics.Measure(ctx, q)
	if err != nil {
		// No data: the engine holds (it never scales on missing data).
		c.Log.Warn("no measurements", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Error(err))
		m = Measurement{}
	}
	limit := c.InitSamples
	if limit == 0 {
		limit = 20
	}
	return decide.Snapshot{
		Now:          now,
		ArrivalRates: m.ArrivalRates, ServiceTime: m.ServiceTime, ServiceSCV: m.ServiceSCV, ArrivalSCV: m.ArrivalSCV,
		MeasuredLatency: m.MeasuredLatency,
		CurrentReplicas: t.replicas, ReadyReplicas: ready,
		Pods:      DecidePods(podList.Items, m.Pods),
		Nodes:     DecideNodes(nodeList.Items, allPods, owned, m.Nodes, m.Pods),
		InitTimes: InitTimes(podList.Items, limit),
		DataTime:  m.DataTime, Complete: m.Complete,
	}, podList.Items, nil
}

// act carries out a decision. Replica changes set an absolute count through the scale
// subresource, so repeating an action after a restart changes nothing.
func (c *Controller) act(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, d decide.Decision) error {
	var errs []error
	if d.Action.Has(decide.ActionVertical) && d.DesiredCPU > 0 {
		if err := c.resizePods(ctx, qa.Namespace, t, d.DesiredCPU); err != nil {
			errs = append(errs, err)
		}
	}
	horizontal := d.Action.Has(decide.ActionHorizontal) && d.DesiredReplicas != t.replicas
	if horizontal {
		if err := c.setReplicas(ctx, qa, t, d.DesiredReplicas); err != nil {
			errs = append(errs, err)
		}
	}
	if d.Action.Has(decide.ActionMigrate) && d.Migration != nil {
		if horizontal {
			// The surge needs a stable replica count: move the pod in a later cycle.
			c.Log.Info("migration deferred: the replica count changes this cycle", zap.String("pod", d.Migration.Pod))
		} else if err := c.startMigration(ctx, qa, t, d.Migration); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// resizePods sets every running pod's first container's CPU request to cpu millicores
// in place (pods/resize), scaling its limit in proportion when it has one.
func (c *Controller) resizePods(ctx context.Context, ns string, t target, cpu int64) error {
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: t.selector.String()})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Spec.NodeName == "" || len(p.Spec.Containers) == 0 {
			continue
		}
		ctr := p.Spec.Containers[0]
		req := ctr.Resources.Requests.Cpu().MilliValue()
		if req == cpu {
			continue
		}
		res := map[string]any{"requests": map[string]any{"cpu": fmt.Sprintf("%dm", cpu)}}
		if lim := ctr.Resources.Limits.Cpu().MilliValue(); lim > 0 && req > 0 {
			res["limits"] = map[string]any{"cpu": fmt.Sprintf("%dm", lim*cpu/req)}
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": ctr.Name, "resources": res}}}})
		if _, err := c.Kube.CoreV1().Pods(ns).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
			errs = append(errs, fmt.Errorf("resize %s to %dm: %w", p.Name, cpu, err))
		}
	}
	return errors.Join(errs...)
}

func engineFromAnnotation(v string) (*decide.Engine, error) {
	if v == "" {
		return decide.NewEngine(), nil
	}
	var st decide.State
	if err := json.Unmarshal([]byte(v), &st); err != nil {
		return nil, err
	}
	return decide.NewEngineFromState(st), nil
}

func (c *Controller) saveEngine(ctx context.Context, qa *v1alpha1.QueueAutoscaler, e *decide.Engine) error {
	data, err := json.Marshal(e.State())
	if err != nil {
		return err
	}
	if qa.Annotations[StateAnnotation] == string(data) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{StateAnnotation: string(data)}}})
	_, err = c.Dynamic.Resource(GVR).Namespace(qa.Namespace).Patch(ctx, qa.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("save engine state: %w", err)
	}
	return nil
}

// report sends the decision to the log, an Event (when something changed or failed)
// and the sink.
func (c *Controller) report(ctx context.Context, qa *v1alpha1.QueueAutoscaler, d decide.Decision, actErr error) {
	x := d.Explanation
	explanation, _ := json.Marshal(d)
	c.Log.Info("decision",
		zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name),
		zap.String("action", d.Action.String()), zap.Int32("desiredReplicas", d.DesiredReplicas),
		zap.Int64("desiredCPUMillis", d.DesiredCPU), zap.Bool("dryRun", c.dryRun(qa)),
		zap.String("reason", x.Reason), zap.String("heldBecause", x.HeldBecause),
		zap.NamedError("actionError", actErr), zap.ByteString("decision", explanation))
	if d.Action != decide.ActionNone {
		verb := "Scaled"
		if c.dryRun(qa) {
			verb = "DryRun"
		}
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, verb, "%s to %d replicas, %dm CPU: %s (λ=%.3g/s, E[S]=%.3gs, L=%s, G=%.2f)",
			d.Action, d.DesiredReplicas, d.DesiredCPU, x.Reason, x.ArrivalRate, x.ServiceTime, seconds(x.Latency), x.Normalized)
	}
	if c.Sink != nil {
		if err := c.Sink.RecordDecision(ctx, qa.Namespace, qa.Name, d, c.dryRun(qa)); err != nil {
			c.Log.Warn("decision not stored", zap.Error(err))
		}
	}
}

func (c *Controller) writeStatus(ctx context.Context, qa *v1alpha1.QueueAutoscaler, now time.Time, mutate func(*v1alpha1.QueueAutoscalerStatus)) error {
	for attempt := 0; ; attempt++ {
		mutate(&qa.Status)
		qa.Status.ObservedGeneration = qa.Generation
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(qa)
		if err != nil {
			return err
		}
		_, err = c.Dynamic.Resource(GVR).Namespace(qa.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
		if err == nil || !apierrors.IsConflict(err) || attempt == 3 {
			if err != nil {
				return fmt.Errorf("update status: %w", err)
			}
			return nil
		}
		fresh, gerr := c.Dynamic.Resource(GVR).Namespace(qa.Namespace).Get(ctx, qa.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		status := qa.Status
		*qa = v1alpha1.QueueAutoscaler{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fresh.Object, qa); err != nil {
			return err
		}
		qa.Status = status
	}
}
