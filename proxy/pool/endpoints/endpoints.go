// Package endpoints tells a qas-proxy sidecar where the pooled data plane's front is:
// the ready replicas of the front's Service, read from its EndpointSlices through a
// namespaced client-go informer (docs/pooling.md, "Peers and fronts from
// EndpointSlices").
//
// The sidecar's ServiceAccount may get, list and watch endpointslices in its own
// namespace and nothing else (the Role the decider creates for a pooled
// QueueAutoscaler), so the informer is namespaced and selects the front Service's
// slices by their kubernetes.io/service-name label.
//
// When the API server cannot be reached, the sidecar keeps the last list it had for a
// bounded time (MaxStale, default 5 minutes), since fronts rarely move; after that it
// returns no front at all, and the proxy queues locally, as with random routing.
package endpoints

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultMaxStale is Options.MaxStale's default: how long the last list of fronts is
// used while the API server cannot be reached.
const DefaultMaxStale = 5 * time.Minute

// DefaultWatchTimeout is how long a watch may stay open, asked of the API server
// (client-go's reflector picks 5 to 10 minutes); WatchGrace is added on the client side.
const DefaultWatchTimeout = 10 * time.Minute

// WatchGrace is how long past the watch timeout it asked for the sidecar waits for the
// API server to end a watch before it ends it itself: a watch still open then sits on a
// dead connection (a network partition sends no reset), and its list is not current.
const WatchGrace = 30 * time.Second

// ServiceNameLabel is the label the EndpointSlice controller puts on a Service's slices.
const ServiceNameLabel = discoveryv1.LabelServiceName

// Options tune a Watcher; the zero value gives the defaults.
type Options struct {
	// MaxStale is how long after losing the API server the last list is still used
	// (default DefaultMaxStale). Past it Fronts returns none.
	MaxStale time.Duration
	// Clock is the time source (default the real clock); tests step a fake one.
	Clock clock.Clock
	// Log receives the transitions (lost, back, stale); default none.
	Log *zap.Logger
}

// Watcher keeps the ready endpoints of one Service's port from its EndpointSlices. It
// implements the proxy's FrontSource (Fronts() []string). Build it with New.
type Watcher struct {
	namespace, service, portName string
	maxStale                     time.Duration
	clock                        clock.Clock
	log                          *zap.Logger
	informer                     cache.SharedIndexInformer

	mu sync.Mutex
	// fronts is the list computed at the last change of the slices, sorted; it is
	// never modified in place, only replaced.
	fronts []string
	// connected is true while a list succeeded and its watch is open: the list is
	// current. lostAt is when it last stopped being so.
	connected bool
	lostAt    time.Time
	// everSynced: the first list arrived (fronts is meaningful).
	everSynced  bool
	staleLogged bool
}

// State is what the Watcher knows, for logs and the proxy's stats.
type State struct {
	// Fronts is the list Fronts returns now.
	Fronts []string
	// Known is the last list read from the API server, used or not.
	Known []string
	// Connected: the list is current (its watch is open).
	Connected bool
	// LostAt is when the watch was last lost (zero if never).
	LostAt time.Time
	// Stale: the API server has been unreachable for longer than MaxStale, so no
	// front is used.
	Stale bool
}

// New starts watching the EndpointSlices of Service namespace/service and returns at
// once; Fronts returns none until the first list arrived (WaitForSync waits for it).
// portName picks the port of the slices whose number the fronts are reached on ("" is
// the single unnamed port of a one-port Service). The informer runs until ctx ends.
func New(ctx context.Context, client kubernetes.Interface, namespace, service, portName string, opts Options) (*Watcher, error) {
	if client == nil {
		return nil, errors.New("endpoints: no Kubernetes client")
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("endpoints: namespace %q: %s (is POD_NAMESPACE set?)", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(service); len(errs) > 0 {
		return nil, fmt.Errorf("endpoints: service %q: %s", service, strings.Join(errs, "; "))
	}
	if portName != "" {
		if errs := validation.IsValidPortName(portName); len(errs) > 0 {
			return nil, fmt.Errorf("endpoints: port name %q: %s", portName, strings.Join(errs, "; "))
		}
	}
	if opts.MaxStale < 0 {
		return nil, fmt.Errorf("endpoints: max stale %s is negative", opts.MaxStale)
	}
	if opts.MaxStale == 0 {
		opts.MaxStale = DefaultMaxStale
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	w := &Watcher{
		namespace: namespace, service: service, portName: portName,
		maxStale: opts.MaxStale, clock: opts.Clock,
		log: opts.Log.With(zap.String("frontService", namespace+"/"+service), zap.String("port", portName)),
	}
	w.lostAt = w.clock.Now()
	selector := ServiceNameLabel + "=" + service
	slicesAPI := client.DiscoveryV1().EndpointSlices(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			list, err := slicesAPI.List(ctx, o)
			if err != nil {
				w.lost(err)
				return nil, err
			}
			w.confirmed()
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			timeout := DefaultWatchTimeout
			if o.TimeoutSeconds != nil && *o.TimeoutSeconds > 0 {
				timeout = time.Duration(*o.TimeoutSeconds) * time.Second
			} else {
				secs := int64(timeout / time.Second)
				o.TimeoutSeconds = &secs
			}
			inner, err := slicesAPI.Watch(ctx, o)
			if err != nil {
				w.lost(err)
				return nil, err
			}
			return w.guard(inner, timeout+WatchGrace), nil
		},
	}
	// The wrapper keeps whether the client serves watch-list (a streamed initial list):
	// the real API server does, client-go's fake does not.
	w.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client),
		&discoveryv1.EndpointSlice{}, cache.SharedIndexInformerOptions{})
	recompute := func(any) { w.recompute() }
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: recompute, UpdateFunc: func(_, obj any) { w.recompute() }, DeleteFunc: recompute,
	}); err != nil {
		return nil, err
	}
	if err := w.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) { w.lost(err) }); err != nil {
		return nil, err
	}
	go w.informer.RunWithContext(ctx)
	return w, nil
}

// WaitForSync waits until the first list arrived or ctx ends, and reports which.
func (w *Watcher) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced)
}

// Fronts returns host:port of every ready, not terminating endpoint of the Service's
// port, sorted; none before the first list and once the API server has been
// unreachable for longer than MaxStale. The caller owns the returned slice.
func (w *Watcher) Fronts() []string {
	w.syncedOnce()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.usable() {
		return slices.Clone(w.fronts)
	}
	return nil
}

// State returns what the Watcher knows now.
func (w *Watcher) State() State {
	w.syncedOnce()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := State{Known: slices.Clone(w.fronts), Connected: w.connected}
	if !w.connected {
		st.LostAt = w.lostAt
	}
	if w.usable() {
		st.Fronts = slices.Clone(w.fronts)
	} else {
		st.Stale = w.everSynced
	}
	return st
}

// syncedOnce reads the store once the informer has synced for the first time: an
// empty first list calls no event handler, and the handlers run after HasSynced.
func (w *Watcher) syncedOnce() {
	w.mu.Lock()
	done := w.everSynced
	w.mu.Unlock()
	if !done && w.informer.HasSynced() {
		w.recompute()
	}
}

// usable reports whether the list may be used now; w.mu is held.
func (w *Watcher) usable() bool {
	if !w.everSynced {
		return false
	}
	if w.connected {
		return true
	}
	if w.clock.Since(w.lostAt) <= w.maxStale {
		return true
	}
	if !w.staleLogged {
		w.staleLogged = true
		w.log.Warn("the API server has been unreachable for too long: no front is used (requests queue locally) until it is back",
			zap.Duration("maxStale", w.maxStale), zap.Time("lostAt", w.lostAt))
	}
	return false
}

// confirmed records that the list is current: a list succeeded, or a watch started.
func (w *Watcher) confirmed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.connected && w.everSynced {
		w.log.Info("API server reachable again: the list of fronts is current", zap.Duration("after", w.clock.Since(w.lostAt)))
	}
	w.connected, w.staleLogged = true, false
}

// lost records that the list may no longer be current (a list or watch failed, or a
// watch ended): it is used for MaxStale from now, unless the list is confirmed again.
func (w *Watcher) lost(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.connected {
		return // already lost: the time it was lost stands
	}
	w.connected, w.lostAt = false, w.clock.Now()
	if err != nil {
		w.log.Warn("lost the API server: keeping the last list of fronts for a while", zap.Duration("maxStale", w.maxStale), zap.Error(err))
	}
}

// guard passes inner's events on and ends it when it outlives deadline (the API server
// should have ended it before). A watch that started confirms the list; one that ends,
// however, makes it unconfirmed until the next list or watch starts.
func (w *Watcher) guard(inner watch.Interface, deadline time.Duration) watch.Interface {
	w.confirmed()
	out := make(chan watch.Event)
	g := &guardedWatch{inner: inner, out: out, stop: make(chan struct{})}
	go func() {
		defer close(out)
		defer w.lost(nil)
		timer := w.clock.NewTimer(deadline)
		defer timer.Stop()
		in := inner.ResultChan()
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				if ev.Type == watch.Error {
					w.lost(fmt.Errorf("watch error: %v", ev.Object))
				}
				select {
				case out <- ev:
				case <-g.stop:
					return
				}
			case <-timer.C():
				w.log.Warn("the API server did not end the watch in time: ending it (dead connection?)", zap.Duration("after", deadline))
				inner.Stop()
				return
			case <-g.stop:
				return
			}
		}
	}()
	return g
}

type guardedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	once  sync.Once
	stop  chan struct{}
}

func (g *guardedWatch) Stop() {
	g.once.Do(func() { close(g.stop); g.inner.Stop() })
}

func (g *guardedWatch) ResultChan() <-chan watch.Event { return g.out }

// recompute rebuilds the list of fronts from the informer's store.
func (w *Watcher) recompute() {
	var all []*discoveryv1.EndpointSlice
	for _, obj := range w.informer.GetStore().List() {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			all = append(all, s)
		}
	}
	fronts := Ready(all, w.service, w.portName)
	synced := w.informer.HasSynced()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Equal(fronts, w.fronts) {
		w.log.Info("fronts changed", zap.Strings("fronts", fronts))
	}
	w.fronts = fronts
	// Events of the initial list arrive one slice at a time: the list counts once the
	// informer has synced.
	w.everSynced = w.everSynced || synced
}

// Ready returns host:port of the endpoints of service's slices that are ready and not
// terminating, on the port named portName, sorted and without duplicates (an endpoint
// can sit in two slices while the controller moves it). Slices of FQDN addresses, and
// ports that are not TCP, are left out: the proxy dials IPs over TCP. A nil ready
// condition counts as ready, as the EndpointSlice API says; a nil terminating as not
// terminating.
func Ready(all []*discoveryv1.EndpointSlice, service, portName string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range all {
		if s.Labels[ServiceNameLabel] != service {
			continue
		}
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		port := int32(0)
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name != portName || p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
				continue
			}
			if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
				continue
			}
			port = *p.Port
			break
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
				continue
			}
			if len(ep.Addresses) == 0 {
				continue
			}
			// The addresses of one endpoint are fungible; the API says to use the first.
			ip := net.ParseIP(ep.Addresses[0])
			if ip == nil {
				continue
			}
			hp := net.JoinHostPort(ip.String(), strconv.Itoa(int(port)))
			if !seen[hp] {
				seen[hp] = true
				out = append(out, hp)
			}
		}
	}
	slices.Sort(out)
	return out
}

// NewInCluster is New with a client built from the pod's ServiceAccount (the token
// and CA the kubelet mounts), so that qas-proxy's main needs no Kubernetes import.
func NewInCluster(ctx context.Context, namespace, service, portName string, opts Options) (*Watcher, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("endpoints: in-cluster client (is the pod's ServiceAccount token mounted in the qas-proxy container?): %w", err)
	}
	cfg.UserAgent = "qas-proxy/endpoints"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	return New(ctx, client, namespace, service, portName, opts)
}
