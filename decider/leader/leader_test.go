package leader

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Options{}) }

func TestRunRejectsIncompleteConfig(t *testing.T) {
	err := Run(context.Background(), fake.NewSimpleClientset(), Config{Namespace: "ns"}, zaptest.NewLogger(t), func(context.Context) {})
	require.ErrorContains(t, err, "namespace, name and identity are required")
}

// candidate runs one elector and records when it leads and its shutdowns.
type candidate struct {
	id      string
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	leading bool
	terms   int
	// shutdowns counts OnShutdown's runs; the last saw the lease held by
	// holderAtShutdown and, if leadEndedFirst, the leader's work already over.
	shutdowns        int
	holderAtShutdown string
	leadEndedFirst   bool
}

func (c *candidate) isLeading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leading
}

func start(t *testing.T, kube kubernetes.Interface, ns, id string) *candidate {
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{id: id, cancel: cancel, done: make(chan struct{})}
	cfg := Config{Namespace: ns, Name: "qas-decider", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		OnShutdown: func(sctx context.Context) {
			lease, err := kube.CoordinationV1().Leases(ns).Get(sctx, "qas-decider", metav1.GetOptions{})
			c.mu.Lock()
			defer c.mu.Unlock()
			c.shutdowns++
			c.leadEndedFirst = c.terms > 0 && !c.leading
			if err == nil && lease.Spec.HolderIdentity != nil {
				c.holderAtShutdown = *lease.Spec.HolderIdentity
			}
		}}
	go func() {
		defer close(c.done)
		_ = Run(ctx, kube, cfg, zaptest.NewLogger(t), func(leaderCtx context.Context) {
			c.mu.Lock()
			c.leading, c.terms = true, c.terms+1
			c.mu.Unlock()
			<-leaderCtx.Done()
			c.mu.Lock()
			c.leading = false
			c.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func TestOnlyOneLeadsAndFailoverWorks(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	a := start(t, c.Clientset(), ns, "decider-a")
	b := start(t, c.Clientset(), ns, "decider-b")

	var leader, follower *candidate
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		switch {
		case a.isLeading() && b.isLeading():
			return false, fmt.Errorf("both candidates lead")
		case a.isLeading():
			leader, follower = a, b
		case b.isLeading():
			leader, follower = b, a
		}
		return leader != nil, nil
	})
	require.NoError(t, err)

	// While the leader renews, the follower never leads.
	for i := 0; i < 20; i++ {
		require.False(t, follower.isLeading() && leader.isLeading(), "two leaders at once")
		time.Sleep(50 * time.Millisecond)
	}
	lease, err := c.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), "qas-decider", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, leader.id, *lease.Spec.HolderIdentity)

	// The leader stops (a rolling update): it releases the lease and the other takes over.
	leader.cancel()
	<-leader.done
	require.False(t, leader.isLeading())
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return follower.isLeading(), nil
	})
	require.NoError(t, err, "follower never took over")
	lease, err = c.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), "qas-decider", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, follower.id, *lease.Spec.HolderIdentity)
}

// TestShutdownRunsWhileLeadingThenReleases: on a clean stop the leader's work ends
// first, then OnShutdown runs while the lease is still its own, then the lease is
// released. A follower that stops runs no OnShutdown.
func TestShutdownRunsWhileLeadingThenReleases(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	kube := c.Clientset()
	a := start(t, kube, ns, "decider-a")
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return a.isLeading(), nil
	})
	require.NoError(t, err)
	b := start(t, kube, ns, "decider-b") // follows

	b.cancel()
	<-b.done
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Equal(t, 1, a.shutdowns)
	require.True(t, a.leadEndedFirst, "the leader's work stops before the shutdown")
	require.Equal(t, "decider-a", a.holderAtShutdown, "the shutdown runs while the lease is held")
	lease, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "qas-decider", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", "released after the shutdown")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Zero(t, b.shutdowns, "a follower has nothing to shut down")
}
