package controller_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	scalefake "k8s.io/client-go/scale/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/measurement"
)

// measured is a measurement.Source that returns one answer.
type measured struct {
	w   measurement.Workload
	err error
}

func (m measured) Measure(context.Context, measurement.Query) (measurement.Workload, error) {
	return m.w, m.err
}

// fakeCluster is a controller on client-go fakes: a Deployment "web" whose scale
// subresource reports replicas pods selected by app=web, those pods Ready on node
// n1, and the QueueAutoscaler "web" with spec.
type fakeCluster struct {
	ctrl     *controller.Controller
	dyn      *dynamicfake.FakeDynamicClient
	recorder *record.FakeRecorder
	scaledTo []int32
	// conflicts is how many scale updates still answer 409 Conflict (the
	// Deployment's status written in between); updates counts every try.
	conflicts, updates int
}

func newFakeCluster(t *testing.T, replicas int32, spec map[string]any, src measurement.Source, scaleErr error) *fakeCluster {
	t.Helper()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	var objs []k8sruntime.Object
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}
	objs = append(objs, node)
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(rune('a'+i)), Namespace: "ns", Labels: map[string]string{"app": "web"},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		p.Spec.NodeName = "n1"
		p.Spec.Containers = []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
		objs = append(objs, p)
	}
	kube := kubefake.NewClientset(objs...)

	full := map[string]any{
		"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
		"minReplicas":    int64(1), "maxReplicas": int64(20),
		"target": map[string]any{"latency": "200ms", "percentile": 95.0},
	}
	for k, v := range spec {
		full[k] = v
	}
	qa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "qas.dev/v1alpha1", "kind": "QueueAutoscaler",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "generation": int64(1)}, "spec": full,
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(),
		map[schema.GroupVersionResource]string{controller.GVR: "QueueAutoscalerList"}, qa)

	f := &fakeCluster{dyn: dyn, recorder: record.NewFakeRecorder(100)}
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if scaleErr != nil {
			return true, nil, scaleErr
		}
		return true, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}, Status: autoscalingv1.ScaleStatus{Replicas: replicas, Selector: "app=web"}}, nil
	})
	scales.AddReactor("update", "deployments", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		f.updates++
		if f.conflicts > 0 {
			f.conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("the object has been modified"))
		}
		f.scaledTo = append(f.scaledTo, sc.Spec.Replicas)
		return true, sc, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{appsv1.SchemeGroupVersion})
	mapper.Add(appsv1.SchemeGroupVersion.WithKind("Deployment"), meta.RESTScopeNamespace)

	cl := controller.Clients{Kube: kube, Dynamic: dyn, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), Scales: scales, Mapper: mapper}
	f.ctrl = controller.New(cl, controller.NewInformers(cl), src, nil, f.recorder, zaptest.NewLogger(t), clocktesting.NewFakePassiveClock(now))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, f.ctrl.Start(ctx))
	return f
}

func (f *fakeCluster) qa(t *testing.T) v1alpha1.QueueAutoscaler {
	obj, err := f.dyn.Resource(controller.GVR).Namespace("ns").Get(context.Background(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	var qa v1alpha1.QueueAutoscaler
	require.NoError(t, k8sruntime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &qa))
	return qa
}

func (f *fakeCluster) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func load(lambda, es float64) measurement.Workload {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	return measurement.Workload{
		ArrivalRates: []decide.Sample{{Time: now.Add(-10 * time.Second), Rate: lambda}, {Time: now, Rate: lambda}},
		ServiceTime:  es, DataTime: now, Complete: true,
	}
}

// TestReconcile runs one cycle per case on client-go fakes: what is scaled, what the
// status says, which events are recorded.
func TestReconcile(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spec      map[string]any
		src       measurement.Source
		scaleErr  error
		wantErr   bool
		scaledTo  []int32 // nil: the target is not changed
		condition [3]string
		events    []string // each a prefix of a recorded event, in order
	}{
		{name: "scales up under load", src: measured{w: load(60, 0.05)},
			// 12 pods meet the target; the HPA's default scale-up rules allow max(+4 pods, +100 %) a period: 2 → 6.
			scaledTo: []int32{6}, condition: [3]string{"ScalingActive", "True", "ValidMeasurements"}, events: []string{"Normal Scaled horizontal to 6 replicas"}},
		{name: "dry run changes nothing", spec: map[string]any{"dryRun": true}, src: measured{w: load(60, 0.05)},
			condition: [3]string{"ScalingActive", "True", "ValidMeasurements"}, events: []string{"Normal DryRun horizontal to 6 replicas"}},
		{name: "holds without measurements", src: measured{err: errors.New("influxdb is down")},
			condition: [3]string{"ScalingActive", "False", "Holding"}},
		{name: "an invalid spec is reported, not retried", spec: map[string]any{"target": map[string]any{"latency": "soon"}}, src: measured{w: load(60, 0.05)},
			condition: [3]string{"Ready", "False", "InvalidSpec"}, events: []string{"Warning InvalidSpec spec.target.latency"}},
		{name: "a target that cannot be read", src: measured{w: load(60, 0.05)}, wantErr: true,
			scaleErr:  apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web"),
			condition: [3]string{"AbleToScale", "False", "FailedGetScale"}, events: []string{"Warning FailedGetScale"}},
		{name: "an unreachable target is said", spec: map[string]any{"target": map[string]any{"latency": "1ms", "percentile": 95.0}}, src: measured{w: load(10, 0.05)},
			scaledTo: []int32{6}, condition: [3]string{"ScalingLimited", "True", "TargetUnreachable"},
			events: []string{"Normal Scaled", "Warning TargetUnreachable the target p95 latency of 1ms is unreachable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, 2, tc.spec, tc.src, tc.scaleErr)
			_, err := f.ctrl.Reconcile(context.Background(), "ns", "web")
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.scaledTo, f.scaledTo)
			qa := f.qa(t)
			c := meta.FindStatusCondition(qa.Status.Conditions, tc.condition[0])
			require.NotNil(t, c, "condition %s in %+v", tc.condition[0], qa.Status.Conditions)
			require.Equal(t, tc.condition[1], string(c.Status), c.Message)
			require.Equal(t, tc.condition[2], c.Reason, c.Message)
			events := f.events()
			require.Len(t, events, len(tc.events), "%q", events)
			for i, want := range tc.events {
				require.Contains(t, events[i], want)
			}
		})
	}
}

// TestScaleRetriesAConflict: a scale update that meets a conflict (the
// Deployment's controller wrote its status between the read and the write) is
// read and tried again, so the cycle's decision is carried out; one that keeps
// conflicting past client-go's default back-off fails the cycle with the
// conflict, and nothing was scaled.
func TestScaleRetriesAConflict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		conflicts int
		scaledTo  []int32
		updates   int
		wantErr   bool
	}{
		{name: "no conflict", conflicts: 0, scaledTo: []int32{6}, updates: 1},
		{name: "two conflicts, then scaled", conflicts: 2, scaledTo: []int32{6}, updates: 3},
		{name: "conflicts past the back-off", conflicts: 100, updates: 5, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCluster(t, 2, nil, measured{w: load(60, 0.05)}, nil)
			f.conflicts = tc.conflicts
			_, err := f.ctrl.Reconcile(context.Background(), "ns", "web")
			if tc.wantErr {
				require.Error(t, err)
				require.True(t, apierrors.IsConflict(err), "%v", err)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.scaledTo, f.scaledTo)
			require.Equal(t, tc.updates, f.updates)
		})
	}
}

// TestReconcileCarriesTheRateCV2: the measurement's per-second rate variance
// reaches the engine's snapshot: a valid one decides as before, one beyond
// what the engine accepts is refused by name (the controller passed it on).
func TestReconcileCarriesTheRateCV2(t *testing.T) {
	valid := load(60, 0.05)
	valid.RateCV2, valid.RateCV2Pairs = 0.3, 40
	f := newFakeCluster(t, 2, nil, measured{w: valid}, nil)
	_, err := f.ctrl.Reconcile(context.Background(), "ns", "web")
	require.NoError(t, err)
	require.Equal(t, []int32{6}, f.scaledTo)

	absurd := load(60, 0.05)
	absurd.RateCV2, absurd.RateCV2Pairs = 2e4, 40
	f = newFakeCluster(t, 2, nil, measured{w: absurd}, nil)
	_, err = f.ctrl.Reconcile(context.Background(), "ns", "web")
	require.ErrorContains(t, err, "snapshot.rateCV2")
	require.ErrorContains(t, err, "got 20000 over 40")
	require.Nil(t, f.scaledTo)
}

// TestReconcileCarriesTheLatencyBuckets: the measurement's latency histogram
// reaches the engine's snapshot as it is, and the problems the store met
// reading it are logged (the cycle goes on: the histogram is optional).
func TestReconcileCarriesTheLatencyBuckets(t *testing.T) {
	buckets := []decide.LatencyBucket{{UpperBound: 0.0001, Count: 3}, {UpperBound: 0.2, Count: 90}, {UpperBound: 60, Count: 6}, {UpperBound: math.Inf(1), Count: 1}}
	w := load(60, 0.05)
	w.LatencyBuckets = buckets
	w.LatencyBucketsError = `influx: field "latency_bucket_le_0.20" is not in its canonical form "latency_bucket_le_0.2": skipped`
	f := newFakeCluster(t, 2, nil, measured{w: w}, nil)
	seen, logs := reconcileSeen(t, f)
	require.Equal(t, []int32{6}, f.scaledTo, "decides as without them")
	require.Equal(t, buckets, seen.LatencyBuckets)
	require.Equal(t, 100.0, seen.LatencySamples, "the requests the histogram counts weigh the closed loop")
	warned := logs.FilterMessage("latency histogram read with problems").All()
	require.Len(t, warned, 1)
	require.Equal(t, w.LatencyBucketsError, warned[0].ContextMap()["error"])
	require.EqualValues(t, 4, warned[0].ContextMap()["buckets"])

	seen, _ = reconcileSeen(t, newFakeCluster(t, 2, nil, measured{w: load(60, 0.05)}, nil))
	require.Nil(t, seen.LatencyBuckets, "none measured: none passed")
	require.Zero(t, seen.LatencySamples, "unknown: the engine takes λ × the interval")
}

// reconcileSeen runs one cycle of f's controller for ns/web with its warnings
// observed, and returns the snapshot the engine decided on (exactly one) and
// the warnings.
func reconcileSeen(t *testing.T, f *fakeCluster) (decide.Snapshot, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	f.ctrl.Log = zap.New(core)
	var seen []decide.Snapshot
	controller.SetDecideHook(f.ctrl, func(s decide.Snapshot) { seen = append(seen, s) })
	_, err := f.ctrl.Reconcile(context.Background(), "ns", "web")
	require.NoError(t, err)
	require.Len(t, seen, 1, "the engine decided once")
	return seen[0], logs
}

// TestReconcileCarriesTheServiceBuckets: the measurement's service-time
// histogram reaches the engine's snapshot as it is, beside the latency
// histogram, and the problems the store met reading it are logged apart from
// the latency histogram's (the cycle goes on: the histogram is optional).
func TestReconcileCarriesTheServiceBuckets(t *testing.T) {
	const (
		latencyLog = "latency histogram read with problems"
		serviceLog = "service-time histogram read with problems"
	)
	service := []decide.LatencyBucket{{UpperBound: 0.025, Count: 40}, {UpperBound: 0.05, Count: 45}, {UpperBound: 0.1, Count: 15}, {UpperBound: math.Inf(1), Count: 0}}
	latency := []decide.LatencyBucket{{UpperBound: 0.05, Count: 70}, {UpperBound: 0.1, Count: 30}, {UpperBound: math.Inf(1), Count: 0}}
	malformed := `influx: field "service_bucket_le_0.10" is not in its canonical form "service_bucket_le_0.1": skipped`
	failed := "store: latency and service buckets: flux query: connection reset by peer"
	for _, tc := range []struct {
		name                       string
		service, latency           []decide.LatencyBucket
		serviceErr, latencyErr     string
		serviceWarns, latencyWarns int
	}{
		{"both histograms", service, latency, "", "", 0, 0},
		{"a malformed service bucket skipped", service, latency, malformed, "", 1, 0},
		{"no service histogram, said", nil, latency, "store: 3 service buckets without service_bucket_le_inf: no whole histogram", "", 1, 0},
		{"the read failed: both said", nil, nil, failed, failed, 1, 1},
		{"none measured: none passed, nothing said", nil, nil, "", "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := load(60, 0.05)
			w.ServiceBuckets, w.ServiceBucketsError = tc.service, tc.serviceErr
			w.LatencyBuckets, w.LatencyBucketsError = tc.latency, tc.latencyErr
			f := newFakeCluster(t, 2, nil, measured{w: w}, nil)
			seen, logs := reconcileSeen(t, f)
			require.Equal(t, tc.service, seen.ServiceBuckets)
			require.Equal(t, tc.latency, seen.LatencyBuckets)
			require.Len(t, f.scaledTo, 1, "the cycle decides with or without them")
			warned := logs.FilterMessage(serviceLog).All()
			require.Len(t, warned, tc.serviceWarns)
			if tc.serviceWarns > 0 {
				require.Equal(t, tc.serviceErr, warned[0].ContextMap()["error"])
				require.EqualValues(t, len(tc.service), warned[0].ContextMap()["buckets"])
				require.Equal(t, "ns/web", warned[0].ContextMap()["queueautoscaler"])
			}
			require.Equal(t, tc.latencyWarns, logs.FilterMessage(latencyLog).Len(), "the latency histogram's problems are its own")
		})
	}
}

// TestReconcileCarriesTheServiceSamples: the requests the newest point's
// service times are over reach the engine's snapshot, which pools the
// intervals by them; none (a collector from before the field) passes as 0.
func TestReconcileCarriesTheServiceSamples(t *testing.T) {
	for _, n := range []float64{0, 250} {
		w := load(60, 0.05)
		w.ServiceSamples = n
		f := newFakeCluster(t, 2, nil, measured{w: w}, nil)
		seen, _ := reconcileSeen(t, f)
		require.Equal(t, n, seen.ServiceSamples)
		require.Equal(t, []int32{6}, f.scaledTo)
	}
}
