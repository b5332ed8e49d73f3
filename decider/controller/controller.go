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
	"slices"
	"sort"
	"strings"
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
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
)

// StateAnnotation holds the engine's memory (stabilisation window, rate-limit budget) on
// the QueueAutoscaler, so that a restarted or newly elected decider continues where the
// last one stopped instead of repeating or undoing its actions.
const StateAnnotation = "qas.dev/engine-state"

// Controller reconciles QueueAutoscalers. Build it with New and call Start before
// Reconcile: pods, nodes and storage are read from informer caches.
type Controller struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Scales   scale.ScalesGetter
	Mapper   meta.RESTMapper
	Metrics  measurement.Source
	Sink     measurement.DecisionSink
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
	// Workers is how many QueueAutoscalers a cycle reconciles at once (default 5,
	// as the HPA's --horizontal-pod-autoscaler-workers): one whose measurements
	// are slow to come holds up only its own worker.
	Workers int
	// MeasureTimeout bounds each read of a workload's measurements (default 5 s).
	// A workload whose data is not back by then is held this cycle, so that a hung
	// InfluxDB cannot stretch the cycle past its interval.
	MeasureTimeout time.Duration
	// EventDelay is how long a reconcile triggered by a pod or target event waits,
	// so that a burst of events (a rollout's pods turning Ready one after another)
	// gives one reconcile; default 2 s. Spec changes are reconciled at once.
	EventDelay time.Duration
	// Front is what runs as the front of a workload whose routing is pooled (zero
	// Image: DefaultFrontConfig).
	Front FrontConfig

	watch *watches
	// beforeAct and afterAct, when set (by tests), run just before and after a
	// cycle's action: where a crash would hurt most.
	beforeAct, afterAct func()
	// beforeRoll, when set (by tests), runs before each write of a routing roll.
	beforeRoll func()
	// beforeDecide, when set (by tests), sees each snapshot the engine decides on.
	beforeDecide func(decide.Snapshot)
}

// dryRun reports whether qa's decisions must only be recorded.
func (c *Controller) dryRun(qa *v1alpha1.QueueAutoscaler) bool { return c.DryRun || qa.Spec.DryRun }

// GVR is the QueueAutoscaler resource.
var GVR = v1alpha1.GroupVersion.WithResource(v1alpha1.Resource)

// Reconcile runs one decision cycle for the QueueAutoscaler ns/name. Every cycle's
// outcome is recorded (status, log, sink), also when it could not decide: a spec the
// engine cannot use (reported in the Ready condition and an Event, not retried), a
// target that cannot be read, or a migration still under way.
func (c *Controller) Reconcile(ctx context.Context, ns, name string) (decide.Decision, error) {
	if c.watch == nil || !c.watch.started.Load() {
		return decide.Decision{}, errors.New("controller not started: call Start first")
	}
	obj, err := c.Dynamic.Resource(GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return decide.Decision{}, c.forget(ctx, ns+"/"+name)
	}
	if err != nil {
		return decide.Decision{}, err
	}
	var qa v1alpha1.QueueAutoscaler
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &qa); err != nil {
		return decide.Decision{}, fmt.Errorf("decode %s/%s: %w", ns, name, err)
	}
	now := c.Clock.Now()
	spec, err := resources.Spec(qa.Spec)
	if err != nil {
		c.Recorder.Event(&qa, corev1.EventTypeWarning, "InvalidSpec", err.Error())
		d := c.hold(ctx, &qa, qa.Status.CurrentReplicas, now, "invalid spec: "+err.Error())
		return d, c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
			resources.HoldStatus(st, d, c.dryRun(&qa), now)
			resources.SetCondition(st, "Ready", metav1.ConditionFalse, "InvalidSpec", err.Error(), qa.Generation, now)
		})
	}
	target, err := c.resolveTarget(ctx, &qa)
	if err != nil {
		c.Recorder.Event(&qa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		d := c.hold(ctx, &qa, qa.Status.CurrentReplicas, now, "cannot read the target's scale: "+err.Error())
		_ = c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
			resources.HoldStatus(st, d, c.dryRun(&qa), now)
			resources.SetCondition(st, "AbleToScale", metav1.ConditionFalse, "FailedGetScale", err.Error(), qa.Generation, now)
		})
		return d, err
	}
	c.watch.track(ctx, c, &qa, target)
	targetPods := c.targetPods(&qa, target)
	pool := c.reconcilePooling(ctx, &qa, targetPods)
	busy, why, migErr := c.continueMigration(ctx, &qa, &target)
	// After a routing switch, the pods created before it are replaced once the new
	// routing can work (rollout.go); not while a migration moves one of them.
	roll := c.reconcileRollout(ctx, &qa, target, targetPods, pool, busy)
	if busy {
		d := c.hold(ctx, &qa, target.replicas, now, why)
		if err := c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
			resources.HoldStatus(st, d, c.dryRun(&qa), now)
			pool.condition(st, qa.Spec.ScaleTargetRef.Name, qa.Generation, now)
			roll.condition(st, qa.Generation, now)
			st.CurrentReplicas = target.replicas
			resources.SetCondition(st, "ScalingActive", metav1.ConditionFalse, "Migrating", why, qa.Generation, now)
		}); err != nil {
			return d, errors.Join(migErr, err)
		}
		return d, migErr
	}
	if migErr != nil {
		return decide.Decision{}, migErr
	}
	// Without measurements the snapshot has none and the engine holds; the hold
	// says why below (noData).
	snap, pods, proxyOffset, err := c.snapshot(ctx, &qa, spec, target, now)
	var noData *measureError
	if err != nil && !errors.As(err, &noData) {
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
	if c.beforeDecide != nil {
		c.beforeDecide(snap)
	}
	d, err := engine.Decide(spec, snap)
	if err != nil {
		err = fmt.Errorf("decide %s/%s: %w", ns, name, err)
		return c.hold(ctx, &qa, target.replicas, now, err.Error()), err
	}
	if noData != nil && d.Explanation.HeldBecause != "" {
		// The engine saw no data; say why there was none.
		d.Explanation.HeldBecause = noData.Error()
		d.Explanation.Reason = "hold: " + noData.Error()
	}
	actErr, saveErr := c.actAndRemember(ctx, &qa, target, d, pods, engine)
	c.report(ctx, &qa, d, actErr)
	c.reportNoMigration(&qa, d)
	initTime := decide.InitTime(snap.InitTimes, spec.Predictive.InitPercentile)
	if err := c.writeStatus(ctx, &qa, now, func(st *v1alpha1.QueueAutoscalerStatus) {
		resources.FillStatus(st, &qa, d, snap, target.replicas, actErr, c.dryRun(&qa), initTime, now)
		resources.ProxyClockCondition(st, proxyOffset, qa.Generation, now)
		pool.condition(st, qa.Spec.ScaleTargetRef.Name, qa.Generation, now)
		roll.condition(st, qa.Generation, now)
	}); err != nil {
		return d, errors.Join(saveErr, err)
	}
	return d, errors.Join(actErr, saveErr)
}

// actAndRemember carries out d (unless dry run) and persists the engine's memory.
// The memory, which counts d's replica change against the rate limits, is saved
// before acting: a decider that crashes after acting and restarts then still knows
// the change was made and cannot take a second step inside the same rate-limit
// period. A crash after saving but before acting only delays the action. An action
// that fails is taken back from the memory. saveErr is a failure to persist
// memory that does not stop the cycle.
func (c *Controller) actAndRemember(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, d decide.Decision, pods []*corev1.Pod, engine *decide.Engine) (actErr, saveErr error) {
	if c.dryRun(qa) || d.Action == decide.ActionNone {
		return nil, c.saveEngine(ctx, qa, engine)
	}
	if err := c.saveEngine(ctx, qa, engine); err != nil {
		actErr = fmt.Errorf("not acted: the engine's memory could not be saved first: %w", err)
	} else {
		if c.beforeAct != nil {
			c.beforeAct()
		}
		actErr = c.act(ctx, qa, t, d, pods)
		if c.afterAct != nil {
			c.afterAct()
		}
		if actErr != nil {
			// A migration that failed to start has recorded its end (the cooldown) in
			// the stored memory, which is the memory saved above plus that: revert
			// the replica change on what is stored.
			if stored, err := engineFromAnnotation(qa.Annotations[StateAnnotation]); err == nil {
				engine = stored
			}
			engine.Revert(d)
			saveErr = c.saveEngine(ctx, qa, engine)
		}
	}
	if actErr != nil {
		c.Recorder.Event(qa, corev1.EventTypeWarning, "FailedAction", actErr.Error())
	}
	return actErr, saveErr
}

// hold records a cycle that did not reach the engine (or the engine refused) as a
// decision to change nothing, with why, in the log and the sink, and returns it for
// the status. current is the replica count as last known.
func (c *Controller) hold(ctx context.Context, qa *v1alpha1.QueueAutoscaler, current int32, now time.Time, why string) decide.Decision {
	d := decide.Decision{Time: now, DesiredReplicas: current, Explanation: decide.Explanation{
		CurrentReplicas: current, HeldBecause: why, Reason: "hold: " + why,
	}}
	if target, err := time.ParseDuration(qa.Spec.Target.Latency); err == nil {
		d.Explanation.Target = target.Seconds()
	}
	c.report(ctx, qa, d, nil)
	return d
}

// targetPods are the target's pods in the cache (none if it cannot be read).
func (c *Controller) targetPods(qa *v1alpha1.QueueAutoscaler, t target) []*corev1.Pod {
	pods, err := c.watch.pods.Pods(qa.Namespace).List(t.selector)
	if err != nil {
		return nil
	}
	return pods
}

// target is the scaled workload as seen through its scale subresource.
type target struct {
	resource schema.GroupVersionResource
	replicas int32
	selector labels.Selector
}

func (c *Controller) resolveTarget(ctx context.Context, qa *v1alpha1.QueueAutoscaler) (target, error) {
	ref := qa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return target{}, fmt.Errorf("scaleTargetRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mapping, err := c.Mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		// A kind installed after the decider started (a new CRD): rediscover once.
		if r, ok := c.Mapper.(meta.ResettableRESTMapper); ok {
			r.Reset()
			mapping, err = c.Mapper.RESTMapping(gk, gv.Version)
		}
	}
	if err != nil {
		return target{}, fmt.Errorf("scaleTargetRef %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	sc, err := c.Scales.Scales(qa.Namespace).Get(ctx, mapping.Resource.GroupResource(), ref.Name, metav1.GetOptions{})
	if err != nil {
		return target{}, fmt.Errorf("get scale of %s %s: %w", ref.Kind, ref.Name, err)
	}
	sel, err := labels.Parse(sc.Status.Selector)
	if err != nil || sc.Status.Selector == "" {
		return target{}, fmt.Errorf("%s %s has no usable pod selector in its scale status (%q)", ref.Kind, ref.Name, sc.Status.Selector)
	}
	return target{resource: mapping.Resource, replicas: sc.Spec.Replicas, selector: sel}, nil
}

// snapshot builds the engine's input from the informer caches and the metrics
// source; it also returns the workload's pods and the proxies' largest clock offset
// from the collector's (seconds), which the status reports. When the measurements
// cannot be read (in time), the snapshot has none, so that the engine holds, and the
// error is a *measureError.
func (c *Controller) snapshot(ctx context.Context, qa *v1alpha1.QueueAutoscaler, spec decide.Spec, t target, now time.Time) (decide.Snapshot, []*corev1.Pod, float64, error) {
	w := c.watch
	pods, err := w.pods.Pods(qa.Namespace).List(t.selector)
	if err != nil {
		return decide.Snapshot{}, nil, 0, fmt.Errorf("list pods: %w", err)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	nodes, err := w.nodes.List(labels.Everything())
	if err != nil {
		return decide.Snapshot{}, nil, 0, fmt.Errorf("list nodes: %w", err)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var allPods []*corev1.Pod
	if spec.Migration.Enabled || spec.Vertical.Enabled {
		// Node room and neighbours matter only to the resize and migration levers.
		if allPods, err = w.pods.List(labels.Everything()); err != nil {
			return decide.Snapshot{}, nil, 0, fmt.Errorf("list pods on nodes: %w", err)
		}
	}
	q := measurement.Query{Namespace: qa.Namespace, Workload: qa.Spec.ScaleTargetRef.Name, Now: now, Percentile: spec.Percentile,
		NeedNodes: spec.Migration.Enabled || spec.Vertical.Enabled}
	owned := map[string]bool{}
	var ready int32
	for _, p := range pods {
		owned[p.Namespace+"/"+p.Name] = true
		q.Pods = append(q.Pods, p.Name)
		if resources.IsReady(p) {
			ready++
			q.Ready = append(q.Ready, p.Name)
		}
		if p.Spec.NodeName != "" && !spec.Migration.Enabled {
			q.Nodes = append(q.Nodes, p.Spec.NodeName)
		}
	}
	if spec.Migration.Enabled {
		// Every node is a possible destination: its usage decides whether it stays
		// under the threshold after the move.
		for _, n := range nodes {
			q.Nodes = append(q.Nodes, n.Name)
		}
	}
	slices.Sort(q.Nodes)
	q.Nodes = slices.Compact(q.Nodes)
	timeout := c.MeasureTimeout
	if timeout <= 0 {
		timeout = DefaultMeasureTimeout
	}
	var measureErr error
	mctx, cancel := context.WithTimeout(ctx, timeout)
	m, err := c.Metrics.Measure(mctx, q)
	cancel()
	if err != nil {
		// No data: the engine holds (it never scales on missing data).
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("measurements late: not read within %s (is InfluxDB overloaded or hung?): %w", timeout, err)
		}
		c.Log.Warn("no measurements", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Error(err))
		m, measureErr = measurement.Workload{}, &measureError{err}
	} else if m.HistoryError != "" {
		// The long history is optional: without it the engine is reactive.
		c.Log.Warn("no long λ history: recurring bursts are not forecast this cycle", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("error", m.HistoryError))
	}
	if err == nil && m.LatencyBucketsError != "" {
		// Optional too: without the histogram the closed loop reads the share of
		// requests over the target from the quantiles.
		c.Log.Warn("latency histogram read with problems", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name),
			zap.Int("buckets", len(m.LatencyBuckets)), zap.String("error", m.LatencyBucketsError))
	}
	if err == nil && m.ServiceBucketsError != "" {
		// Optional as well: without the service histogram the engine reads the
		// service tail from the service quantiles.
		c.Log.Warn("service-time histogram read with problems", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name),
			zap.Int("buckets", len(m.ServiceBuckets)), zap.String("error", m.ServiceBucketsError))
	}
	if err == nil && m.PooledError != "" {
		// Each bad field reads as none; the rest of the measurement stands.
		c.Log.Warn("pooled data plane fields read with problems", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name),
			zap.String("error", m.PooledError))
	}
	if err == nil && !m.Complete {
		c.Log.Info("measurements incomplete: no scale-down this cycle", zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.String("missing", m.MissingSummary()))
	}
	limit := c.InitSamples
	if limit == 0 {
		limit = 20
	}
	storage := resources.Storage{Claims: w.claims, Volumes: w.volumes, Nodes: nodes}
	// The pooled data plane's fields count only for a workload whose routing is
	// pooled: the engine reads them as its data plane's.
	var frontQueue, frontExpired, frontRefused float64
	if pooled(qa) {
		frontQueue = m.FrontQueue
		// The senders' expiries, both actions: each is one request a front gave
		// back unseen (decide/expiry.go says why not front_expired_rate).
		frontExpired, frontRefused = m.ExpiredRequeuedRate+m.ExpiredRelayedRate, m.FrontRefusedRate
	}
	return decide.Snapshot{
		Now:              now,
		FrontQueue:       frontQueue,
		FrontExpiredRate: frontExpired, FrontRefusedRate: frontRefused,
		ArrivalRates: m.ArrivalRates, History: m.History, ServiceTime: m.ServiceTime, ServiceSCV: m.ServiceSCV,
		ServiceSamples: m.ServiceSamples, LatencySamples: latencySamples(m.LatencyBuckets),
		MeasuredLatency: m.MeasuredLatency, MeasuredQuantiles: m.MeasuredQuantiles, ServiceQuantiles: m.ServiceQuantiles,
		LatencyBuckets: m.LatencyBuckets, ServiceBuckets: m.ServiceBuckets,
		ShortArrivalRate: m.ShortArrivalRate, ShortWindow: m.ShortWindow,
		RateCV2: m.RateCV2, RateCV2Pairs: m.RateCV2Pairs,
		CurrentReplicas: t.replicas, ReadyReplicas: ready,
		Pods:      resources.DecidePods(pods, qa.Spec.ScaleTargetRef, m, storage),
		Nodes:     resources.DecideNodes(nodes, allPods, owned, m, storage),
		InitTimes: resources.InitTimes(pods, w.ready, limit),
		DataTime:  m.DataTime, Complete: m.Complete,
	}, pods, m.ProxyClockOffset, measureErr
}

// latencySamples is the requests the newest point's latency histogram counts
// (0: none, and the engine takes λ × the interval), which weigh the closed
// loop's measurement, as the simulator's qas weighs them.
func latencySamples(buckets []decide.LatencyBucket) float64 {
	var n float64
	for _, b := range buckets {
		n += b.Count
	}
	return n
}

// DefaultMeasureTimeout is Controller.MeasureTimeout's default: a third of the
// default 15 s cycle.
const DefaultMeasureTimeout = 5 * time.Second

// measureError is a failed read of the measurements: the cycle goes on and the
// engine holds.
type measureError struct{ err error }

func (e *measureError) Error() string {
	if msg := e.err.Error(); strings.HasPrefix(msg, "no measurements") {
		return msg // the store's own "no measurements of ns/workload in the last ..."
	}
	return "no measurements: " + e.err.Error()
}
func (e *measureError) Unwrap() error { return e.err }

// act carries out a decision. Replica changes set an absolute count through the scale
// subresource, so repeating an action after a restart changes nothing.
func (c *Controller) act(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, d decide.Decision, pods []*corev1.Pod) error {
	var errs []error
	if d.Action.Has(decide.ActionVertical) && d.DesiredCPU > 0 {
		if err := c.resizePods(ctx, pods, d.DesiredCPU); err != nil {
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
	if err := c.patchAnnotations(ctx, qa, patch); err != nil {
		return fmt.Errorf("save engine state: %w", err)
	}
	return nil
}

// patchAnnotations merge-patches qa's annotations and takes the result's annotations
// and resource version, so that the status written later in the cycle does not
// conflict with the cycle's own patch.
func (c *Controller) patchAnnotations(ctx context.Context, qa *v1alpha1.QueueAutoscaler, patch []byte) error {
	out, err := c.Dynamic.Resource(GVR).Namespace(qa.Namespace).Patch(ctx, qa.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	qa.Annotations = out.GetAnnotations()
	qa.ResourceVersion = out.GetResourceVersion()
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
			d.Action, d.DesiredReplicas, d.DesiredCPU, x.Reason, x.ArrivalRate, x.ServiceTime, resources.Seconds(x.Latency), x.Normalized)
	}
	if why := resources.Unreachable(x); why != "" {
		c.Recorder.Event(qa, corev1.EventTypeWarning, "TargetUnreachable", why)
	}
	if c.Sink != nil {
		of := measurement.DecisionOf{Namespace: qa.Namespace, Name: qa.Name, Workload: qa.Spec.ScaleTargetRef.Name}
		if err := c.Sink.RecordDecision(ctx, of, d, c.dryRun(qa)); err != nil {
			c.Log.Warn("decision not stored", zap.Error(err))
		}
	}
}

// reportNoMigration announces, as a Warning Event, a decision that found a pod
// slowed on a hot node but planned no move (the pod cannot be moved, no node can
// take it, the cooldown or the node's back-off): the engine then sizes the
// workload for the slowed pods as they are, scaling horizontally when that is what
// the target needs. The same reason is in the decision's reason (status, log,
// decision point).
func (c *Controller) reportNoMigration(qa *v1alpha1.QueueAutoscaler, d decide.Decision) {
	for _, cand := range d.Explanation.Candidates {
		if cand.Kind == decide.CandidateMigrate && !cand.Feasible && cand.Note != "" {
			c.Recorder.Eventf(qa, corev1.EventTypeWarning, "MigrationBlocked", "%s; the workload is sized for the slowed pods as they are (scaling instead of moving)", cand.Note)
			return
		}
	}
}

// writeStatus applies mutate to qa's status and writes it. On a conflict (the
// resource changed since this cycle read it) it reads the resource again, keeps the
// status computed so far, applies mutate again and retries, as updateNode does.
func (c *Controller) writeStatus(ctx context.Context, qa *v1alpha1.QueueAutoscaler, now time.Time, mutate func(*v1alpha1.QueueAutoscalerStatus)) error {
	reread := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			fresh, err := c.Dynamic.Resource(GVR).Namespace(qa.Namespace).Get(ctx, qa.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			status := qa.Status
			*qa = v1alpha1.QueueAutoscaler{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(fresh.Object, qa); err != nil {
				return err
			}
			qa.Status = status
		}
		reread = true
		mutate(&qa.Status)
		qa.Status.ObservedGeneration = qa.Generation
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(qa)
		if err != nil {
			return err
		}
		_, err = c.Dynamic.Resource(GVR).Namespace(qa.Namespace).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}
