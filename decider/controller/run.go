package controller

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/measurement"
)

// Clients are the API clients the controller acts through.
type Clients struct {
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	Scales   scale.ScalesGetter
	Mapper   meta.RESTMapper
}

// NewClients builds the clients for the cluster at cfg; the REST mapper discovers
// kinds lazily (and again when a scale target's kind is unknown).
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	cached := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Dynamic: dyn, Metadata: md, Scales: scales, Mapper: mapper}, nil
}

// Informers are the shared informer factories the controller reads from: pods,
// nodes, claims and volumes (Core), QueueAutoscalers, and the metadata of scale
// targets. Start starts them.
type Informers struct {
	Core             informers.SharedInformerFactory
	QueueAutoscalers dynamicinformer.DynamicSharedInformerFactory
	Targets          metadatainformer.SharedInformerFactory
}

// NewInformers builds informer factories on cl without resync.
func NewInformers(cl Clients) Informers {
	return Informers{
		Core:             informers.NewSharedInformerFactory(cl.Kube, 0),
		QueueAutoscalers: dynamicinformer.NewDynamicSharedInformerFactory(cl.Dynamic, 0),
		Targets:          metadatainformer.NewSharedInformerFactory(cl.Metadata, 0),
	}
}

// New builds a Controller on the given clients and informers, as the HPA's
// NewHorizontalController does, so that tests can hand it client-go fakes. The
// recorder carries its Events (NewRecorder builds one for a cluster).
func New(cl Clients, inf Informers, metrics measurement.Source, sink measurement.DecisionSink, recorder record.EventRecorder, log *zap.Logger, clk clock.PassiveClock) *Controller {
	return &Controller{
		Kube: cl.Kube, Dynamic: cl.Dynamic, Metadata: cl.Metadata, Scales: cl.Scales, Mapper: cl.Mapper, Metrics: metrics, Sink: sink,
		Recorder: recorder, Clock: clk, Log: log,
		watch: &watches{
			log: log, delay: 2 * time.Second, ready: resources.NewReadyTracker(), informers: inf,
			queue:  workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "queueautoscalers"}),
			queued: make(chan string),
			deps:   map[string]dependency{}, orphans: map[string]*v1alpha1.QueueAutoscaler{},
			watched: map[schema.GroupVersionResource]bool{},
		},
	}
}

// NewRecorder returns an event recorder that writes to the cluster through kube,
// and the function that stops it.
func NewRecorder(kube kubernetes.Interface) (record.EventRecorder, func(), error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "qas-decider"}), broadcaster.Shutdown, nil
}

// NewForConfig builds a Controller talking to the cluster at cfg, with its own
// clients, informers and event recorder. The returned stop function shuts the event
// broadcaster down.
func NewForConfig(cfg *rest.Config, metrics measurement.Source, sink measurement.DecisionSink, log *zap.Logger, clk clock.PassiveClock) (*Controller, func(), error) {
	cl, err := NewClients(cfg)
	if err != nil {
		return nil, nil, err
	}
	recorder, stop, err := NewRecorder(cl.Kube)
	if err != nil {
		return nil, nil, err
	}
	return New(cl, NewInformers(cl), metrics, sink, recorder, log, clk), stop, nil
}

// DefaultWorkers is Controller.Workers' default, the HPA's default too.
const DefaultWorkers = 5

// RunOnce reconciles every QueueAutoscaler in the cluster once, Workers at a time,
// started in the order of their keys. Which ones exist comes from the watch's cache
// (Reconcile reads each from the API server): one created since is queued by the
// watch, one deleted since is forgotten by its reconcile. Errors of single
// resources are logged and do not stop the others; the count of failures is
// returned.
func (c *Controller) RunOnce(ctx context.Context) (failed int, err error) {
	if c.watch == nil || !c.watch.started.Load() {
		return 0, errors.New("controller not started: call Start first")
	}
	keys := c.watch.qas.ListKeys()
	slices.Sort(keys)
	workers := c.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	next := make(chan string)
	var failures atomic.Int32
	var wg sync.WaitGroup
	for range min(workers, len(keys)) {
		wg.Go(func() {
			for k := range next {
				ns, name, _ := strings.Cut(k, "/")
				if _, err := c.Reconcile(ctx, ns, name); err != nil {
					failures.Add(1)
					c.Log.Warn("reconcile failed", zap.String("queueautoscaler", k), zap.Error(err))
				}
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	return int(failures.Load()), nil
}

// Hooks let Run's caller observe it (the runner's metrics); nil fields are skipped.
type Hooks struct {
	// Cycle is called after each full cycle over every QueueAutoscaler that was not
	// cut short by ctx, with the number of failed reconciles and how long it took.
	Cycle func(failed int, err error, took time.Duration)
	// Reconciled is called after each reconcile the watches asked for.
	Reconciled func(key string, err error)
}

// Run reconciles every QueueAutoscaler now and at every tick, and in between each one
// the watches queue (see watches), until ctx ends. Start must have been called.
func (c *Controller) Run(ctx context.Context, ticks <-chan time.Time, hooks Hooks) {
	for {
		start := c.Clock.Now()
		failed, err := c.RunOnce(ctx)
		if ctx.Err() != nil {
			return // leadership lost or shutting down mid-cycle
		}
		if err != nil {
			c.Log.Warn("cycle failed", zap.Error(err))
		}
		if hooks.Cycle != nil {
			hooks.Cycle(failed, err, c.Clock.Since(start))
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				waiting = false
			case k := <-c.Queued():
				ns, name, _ := strings.Cut(k, "/")
				_, err := c.Reconcile(ctx, ns, name)
				if err != nil && ctx.Err() == nil {
					c.Log.Warn("reconcile failed", zap.String("queueautoscaler", k), zap.Error(err))
				}
				if hooks.Reconciled != nil {
					hooks.Reconciled(k, err)
				}
			}
		}
	}
}
