package controller

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
)

// New builds a Controller talking to the cluster at cfg. The returned stop function
// shuts the event broadcaster down.
func New(cfg *rest.Config, metrics MetricsSource, sink DecisionSink, log *zap.Logger, clk clock.PassiveClock) (*Controller, func(), error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "qas-decider"})
	c := &Controller{
		Kube: kube, Dynamic: dyn, Scales: scales, Mapper: mapper, Metrics: metrics, Sink: sink,
		Recorder: recorder, Clock: clk, Log: log,
	}
	return c, broadcaster.Shutdown, nil
}

// RunOnce reconciles every QueueAutoscaler in the cluster once. Errors of single
// resources are logged and do not stop the others; the count of failures is returned.
func (c *Controller) RunOnce(ctx context.Context) (failed int, err error) {
	list, err := c.Dynamic.Resource(GVR).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list queueautoscalers: %w", err)
	}
	for _, item := range list.Items {
		if _, err := c.Reconcile(ctx, item.GetNamespace(), item.GetName()); err != nil {
			failed++
			c.Log.Warn("reconcile failed", zap.String("queueautoscaler", item.GetNamespace()+"/"+item.GetName()), zap.Error(err))
		}
	}
	return failed, nil
}

// Run reconciles every interval until ctx ends. ticks, when not nil, replaces the
// wall-clock ticker (tests drive cycles through it).
func (c *Controller) Run(ctx context.Context, interval time.Duration, ticks <-chan time.Time) error {
	if ticks == nil {
		t := time.NewTicker(interval)
		defer t.Stop()
		ticks = t.C
	}
	for {
		if _, err := c.RunOnce(ctx); err != nil {
			c.Log.Warn("cycle failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
		}
	}
}
