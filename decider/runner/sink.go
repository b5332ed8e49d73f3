package runner

import (
	"context"
	"fmt"
	"math"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/qas-dev/qas/collector/influx"
	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
)

// PointWriter accepts points without blocking; influx.Writer implements it.
type PointWriter interface {
	Write(points ...*write.Point)
}

// TargetLookup names the workload a QueueAutoscaler scales (its scaleTargetRef.name,
// which the collector writes as the workload tag).
type TargetLookup interface {
	Target(ctx context.Context, namespace, name string) (string, error)
}

// InfluxSink records every decision as a qas_decision point, for the dashboards'
// annotations and for audits of why the autoscaler acted.
type InfluxSink struct {
	W       PointWriter
	Targets TargetLookup
	Log     *zap.Logger
}

// RecordDecision implements controller.DecisionSink. The writer buffers and retries,
// so an InfluxDB outage delays the point instead of failing the cycle. The point
// carries the scaled workload's name, so that dashboards match decisions to the
// workload's measurements; a QueueAutoscaler deleted meanwhile gets none.
func (s InfluxSink) RecordDecision(ctx context.Context, namespace, name string, d decide.Decision, dryRun bool) error {
	workload, err := s.Targets.Target(ctx, namespace, name)
	if err != nil && s.Log != nil {
		s.Log.Warn("decision recorded without its workload", zap.String("queueautoscaler", namespace+"/"+name), zap.Error(err))
	}
	s.W.Write(DecisionPoint(namespace, name, workload, d, dryRun))
	return nil
}

// DecisionPoint is the qas_decision point of one decision (collector/influx.Schema).
// Values InfluxDB cannot store (an unstable queue's infinite latency) are left out, and
// so is an unknown workload.
func DecisionPoint(namespace, name, workload string, d decide.Decision, dryRun bool) *write.Point {
	x := d.Explanation
	reason := x.Reason
	if x.HeldBecause != "" {
		reason = "held: " + x.HeldBecause
	}
	fields := map[string]any{
		"current_replicas":       int64(x.CurrentReplicas),
		"desired_replicas":       int64(d.DesiredReplicas),
		"desired_cpu_millicores": d.DesiredCPU,
		"dry_run":                dryRun,
		"reason":                 reason,
	}
	for k, v := range map[string]float64{
		"arrival_rate":             x.ArrivalRate,
		"forecast_arrival_rate":    x.ForecastArrivalRate,
		"service_mean_seconds":     x.ServiceTime,
		"modelled_latency_seconds": x.Latency,
		"measured_latency_seconds": x.MeasuredLatency,
		"target_seconds":           x.Target,
		"lead_seconds":             x.Lead.Seconds(),
		"normalized":               x.Normalized,
	} {
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			fields[k] = v
		}
	}
	tags := map[string]string{"namespace": namespace, "queueautoscaler": name, "action": d.Action.String()}
	if workload != "" {
		tags["workload"] = workload
	}
	return write.NewPoint(influx.Decision, tags, fields, d.Time)
}

// Targets looks QueueAutoscalers' scale targets up in an informer's cache, and asks
// the API server for one the cache does not hold yet (just created).
type Targets struct {
	Dynamic dynamic.Interface
	store   cache.Store
}

// NewTargets starts watching QueueAutoscalers until ctx ends.
func NewTargets(ctx context.Context, dyn dynamic.Interface) *Targets {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(controller.GVR).Informer()
	factory.Start(ctx.Done())
	return &Targets{Dynamic: dyn, store: inf.GetStore()}
}

// Target implements TargetLookup.
func (t *Targets) Target(ctx context.Context, namespace, name string) (string, error) {
	if t.store != nil {
		if obj, ok, _ := t.store.GetByKey(namespace + "/" + name); ok {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				return scaleTargetName(u)
			}
		}
	}
	u, err := t.Dynamic.Resource(controller.GVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("QueueAutoscaler %s/%s is gone", namespace, name)
	}
	if err != nil {
		return "", err
	}
	return scaleTargetName(u)
}

func scaleTargetName(u *unstructured.Unstructured) (string, error) {
	name, _, err := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
	if err != nil || name == "" {
		return "", fmt.Errorf("QueueAutoscaler %s/%s has no spec.scaleTargetRef.name (%v)", u.GetNamespace(), u.GetName(), err)
	}
	return name, nil
}
