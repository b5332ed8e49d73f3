package endpoints_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/qas-dev/qas/proxy/pool"
	"github.com/qas-dev/qas/proxy/pool/endpoints"
)

const (
	ns      = "shop"
	service = "qas-front-web"
	port    = "qas-pool"
)

// endpoint is one endpoint of a slice: its address and conditions (nil: unset).
type endpoint struct {
	ip                 string
	ready, terminating *bool
}

func slice(name, svc string, addrType discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{endpoints.ServiceNameLabel: svc}},
		AddressType: addrType, Ports: ports,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Terminating: e.terminating}})
	}
	return s
}

func tcpPort(name string, n int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(n), Protocol: ptr.To(corev1.ProtocolTCP)}
}

var yes, no = ptr.To(true), ptr.To(false)

func TestReady(t *testing.T) {
	pool := []discoveryv1.EndpointPort{tcpPort("qas-admin", 9901), tcpPort(port, 8080)}
	for _, tt := range []struct {
		name   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"ready and not terminating only, sorted", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4, pool,
			endpoint{"10.0.0.9", yes, no}, endpoint{"10.0.0.2", yes, nil}, endpoint{"10.0.0.3", no, no}, endpoint{"10.0.0.4", yes, yes},
			endpoint{"10.0.0.5", nil, nil})},
			[]string{"10.0.0.2:8080", "10.0.0.5:8080", "10.0.0.9:8080"}},
		{"the named port's number, not another port's", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{tcpPort("other", 1), tcpPort(port, 7000)}, endpoint{"10.0.0.1", yes, no})},
			[]string{"10.0.0.1:7000"}},
		{"no such port", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{tcpPort("other", 1)}, endpoint{"10.0.0.1", yes, no})}, nil},
		{"UDP port left out", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To(int32(53)), Protocol: ptr.To(corev1.ProtocolUDP)}}, endpoint{"10.0.0.1", yes, no})}, nil},
		{"port without number left out", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Name: ptr.To(port)}}, endpoint{"10.0.0.1", yes, no})}, nil},
		{"IPv6 in brackets", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv6, pool, endpoint{"fd00::1", yes, no})},
			[]string{"[fd00::1]:8080"}},
		{"FQDN slices left out", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeFQDN, pool, endpoint{"front.example", yes, no})}, nil},
		{"an address that is not an IP left out", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.300", yes, no})}, nil},
		{"another Service's slice left out", []*discoveryv1.EndpointSlice{slice("a", "qas-front-other", discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.1", yes, no})}, nil},
		{"an endpoint in two slices counted once", []*discoveryv1.EndpointSlice{
			slice("a", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.1", yes, no}),
			slice("b", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.1", yes, no}, endpoint{"10.0.0.2", yes, no}),
		}, []string{"10.0.0.1:8080", "10.0.0.2:8080"}},
		{"unnamed port matches the empty name only", []*discoveryv1.EndpointSlice{slice("a", service, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}}, endpoint{"10.0.0.1", yes, no})}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, endpoints.Ready(tt.slices, service, port))
		})
	}
	unnamed := slice("a", service, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}}, endpoint{"10.0.0.1", yes, no})
	require.Equal(t, []string{"10.0.0.1:80"}, endpoints.Ready([]*discoveryv1.EndpointSlice{unnamed}, service, ""))
}

func TestNewRefusesBadArguments(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset()
	for _, tt := range []struct {
		name, namespace, service, port string
		opts                           endpoints.Options
		want                           string
	}{
		{"no namespace", "", service, port, endpoints.Options{}, "POD_NAMESPACE"},
		{"bad namespace", "Shop", service, port, endpoints.Options{}, `namespace "Shop"`},
		{"no service", ns, "", port, endpoints.Options{}, `service ""`},
		{"bad service", ns, "front.web", port, endpoints.Options{}, `service "front.web"`},
		{"bad port name", ns, service, "Pool Port", endpoints.Options{}, `port name "Pool Port"`},
		{"negative max stale", ns, service, port, endpoints.Options{MaxStale: -time.Second}, "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := endpoints.New(ctx, cs, tt.namespace, tt.service, tt.port, tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
	_, err := endpoints.New(ctx, nil, ns, service, port, endpoints.Options{})
	require.ErrorContains(t, err, "no Kubernetes client")
}

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, msg)
}

func TestWatcherFollowsTheSlices(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset()
	w, err := endpoints.New(ctx, cs, ns, service, port, endpoints.Options{})
	require.NoError(t, err)
	require.True(t, w.WaitForSync(ctx))
	require.Empty(t, w.Fronts(), "no slice yet")

	pool := []discoveryv1.EndpointPort{tcpPort(port, 8080)}
	s := slice("front-1", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.1", yes, no}, endpoint{"10.0.0.2", no, no})
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return len(w.Fronts()) == 1 }, "the ready endpoint appears")
	require.Equal(t, []string{"10.0.0.1:8080"}, w.Fronts())

	// The second replica turns ready, the first starts terminating.
	s.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: no, Terminating: yes}
	s.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: yes, Terminating: no}
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { f := w.Fronts(); return len(f) == 1 && f[0] == "10.0.0.2:8080" }, "the list follows the conditions")

	// Another Service's slice in the namespace changes nothing.
	other := slice("other-1", "web", discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.7", yes, no})
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, cs.DiscoveryV1().EndpointSlices(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}))
	eventually(t, func() bool { return len(w.Fronts()) == 0 }, "the deleted slice's endpoints go")
	st := w.State()
	require.True(t, st.Connected)
	require.False(t, st.Stale)

	// The caller owns what Fronts returns.
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice("front-2", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.3", yes, no}), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return len(w.Fronts()) == 1 }, "the new slice's endpoint appears")
	got := w.Fronts()
	got[0] = "changed"
	require.Equal(t, []string{"10.0.0.3:8080"}, w.Fronts())
}

// flakyAPI makes a fake clientset's EndpointSlice list and watch fail while down is
// set, and hands out watches the test can end.
type flakyAPI struct {
	down    atomic.Bool
	lists   atomic.Int32
	watches atomic.Int32
	mu      sync.Mutex
	current *watch.FakeWatcher
}

func (f *flakyAPI) install(cs *fake.Clientset) {
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.lists.Add(1)
		if f.down.Load() {
			return true, nil, errors.New("connection refused (test)")
		}
		return false, nil, nil
	})
	cs.PrependWatchReactor("endpointslices", func(k8stesting.Action) (bool, watch.Interface, error) {
		f.watches.Add(1)
		if f.down.Load() {
			return true, nil, errors.New("connection refused (test)")
		}
		w := watch.NewFakeWithChanSize(10, false)
		f.mu.Lock()
		f.current = w
		f.mu.Unlock()
		return true, w, nil
	})
}

// cut ends the open watch, as a dying API server does.
func (f *flakyAPI) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current != nil {
		f.current.Stop()
		f.current = nil
	}
}

// flakyWatcher is a synced watcher (MaxStale one minute, on a fake clock) of one
// slice of eps, behind a flakyAPI.
func flakyWatcher(t *testing.T, eps ...endpoint) (*endpoints.Watcher, *flakyAPI, *clocktesting.FakeClock) {
	t.Helper()
	ctx := t.Context()
	pool := []discoveryv1.EndpointPort{tcpPort(port, 8080)}
	cs := fake.NewClientset(slice("front-1", service, discoveryv1.AddressTypeIPv4, pool, eps...))
	api := &flakyAPI{}
	api.install(cs)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	w, err := endpoints.New(ctx, cs, ns, service, port, endpoints.Options{MaxStale: time.Minute, Clock: clk})
	require.NoError(t, err)
	require.True(t, w.WaitForSync(ctx))
	return w, api, clk
}

func TestWatcherKeepsTheLastListForMaxStaleThenNone(t *testing.T) {
	w, api, clk := flakyWatcher(t, endpoint{"10.0.0.1", yes, no}, endpoint{"10.0.0.2", yes, no})
	want := []string{"10.0.0.1:8080", "10.0.0.2:8080"}
	eventually(t, func() bool { return len(w.Fronts()) == 2 }, "the first list")
	require.Equal(t, want, w.Fronts())

	api.down.Store(true)
	api.cut()
	eventually(t, func() bool { return !w.State().Connected }, "the ended watch is noticed")
	eventually(t, func() bool { return api.watches.Load()+api.lists.Load() >= 3 }, "the informer retries and fails")
	require.Equal(t, want, w.Fronts(), "the last list is kept")
	clk.Step(time.Minute)
	require.Equal(t, want, w.Fronts(), "kept for MaxStale")
	clk.Step(time.Second)
	require.Empty(t, w.Fronts(), "none past MaxStale: plain local queueing")
	st := w.State()
	require.True(t, st.Stale)
	require.Equal(t, want, st.Known)
	require.Equal(t, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), st.LostAt)

	api.down.Store(false)
	eventually(t, func() bool { return len(w.Fronts()) == 2 }, "the list is used again once the API server is back")
	require.True(t, w.State().Connected)
}

func TestWatcherEndsAWatchTheAPIServerForgot(t *testing.T) {
	w, api, clk := flakyWatcher(t, endpoint{"10.0.0.1", yes, no})
	eventually(t, func() bool { return api.watches.Load() == 1 && clk.HasWaiters() }, "one watch, guarded")

	// The API server went silent on a dead connection: nothing ends the watch but its
	// client-side deadline (the timeout asked for, at most 10 minutes, plus WatchGrace).
	api.down.Store(true)
	clk.Step(endpoints.DefaultWatchTimeout + endpoints.WatchGrace)
	eventually(t, func() bool { return !w.State().Connected }, "the watch past its deadline is ended")
	require.Equal(t, []string{"10.0.0.1:8080"}, w.Fronts(), "kept for MaxStale from then")
	clk.Step(time.Minute + time.Second)
	require.Empty(t, w.Fronts())
}

func TestWatcherHasNoFrontsBeforeTheFirstList(t *testing.T) {
	ctx := t.Context()
	pool := []discoveryv1.EndpointPort{tcpPort(port, 8080)}
	cs := fake.NewClientset(slice("front-1", service, discoveryv1.AddressTypeIPv4, pool, endpoint{"10.0.0.1", yes, no}))
	api := &flakyAPI{}
	api.down.Store(true)
	api.install(cs)
	w, err := endpoints.New(ctx, cs, ns, service, port, endpoints.Options{})
	require.NoError(t, err)
	eventually(t, func() bool { return api.lists.Load()+api.watches.Load() >= 1 }, "the informer tries")
	require.Empty(t, w.Fronts())
	require.False(t, w.State().Stale, "never listed is not stale")
	api.down.Store(false)
	eventually(t, func() bool { return len(w.Fronts()) == 1 }, "fronts once the first list arrived")
}

func TestWatcherStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cs := fake.NewClientset()
	api := &flakyAPI{}
	api.install(cs)
	w, err := endpoints.New(ctx, cs, ns, service, port, endpoints.Options{})
	require.NoError(t, err)
	require.True(t, w.WaitForSync(ctx))
	cancel()
	eventually(t, func() bool { return !w.State().Connected }, "the watch ends with the context")
}

// The watcher is what qas-proxy's sidecar takes as its source of fronts.
var _ pool.FrontSource = (*endpoints.Watcher)(nil)
