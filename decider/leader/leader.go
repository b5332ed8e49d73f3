// Package leader runs a function only while this process holds a Lease, so that of
// several qas-decider replicas exactly one acts at a time and another takes over when it
// stops.
package leader

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config names the Lease and this candidate, and sets the election's timing.
type Config struct {
	Namespace, Name string
	// Identity must be unique per candidate (the pod name).
	Identity string
	// LeaseDuration is how long a lease is valid without renewal; RenewDeadline how
	// long the leader keeps retrying a renewal; RetryPeriod the pause between tries.
	// Zero values take client-go's usual 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnShutdown, when set, runs when Run's ctx ends while this candidate leads:
	// after lead has returned and before the lease is released, so that no other
	// candidate acts until it is done. Its context ends after ShutdownTimeout
	// (default 30 s) or when the lease is lost.
	OnShutdown      func(ctx context.Context)
	ShutdownTimeout time.Duration
}

// Run blocks until ctx ends, running lead(leaderCtx) whenever this candidate holds the
// lease. leaderCtx is cancelled as soon as leadership is lost or ctx ends; on a clean
// stop Run waits for lead to return, runs OnShutdown, and then releases the lease so
// that a successor need not wait for it to expire.
func Run(ctx context.Context, kube kubernetes.Interface, cfg Config, log *zap.Logger, lead func(context.Context)) error {
	if cfg.Namespace == "" || cfg.Name == "" || cfg.Identity == "" {
		return errors.New("leader: namespace, name and identity are required")
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	// The elector runs on a context of its own, ended only once the leader's work
	// and shutdown are over: the lease stays held (and renewed) meanwhile.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElection()
	var leading sync.Mutex // held while lead and OnShutdown run
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				leading.Lock()
				defer leading.Unlock()
				log.Info("became leader", zap.String("identity", cfg.Identity))
				workCtx, cancel := context.WithCancel(leaderCtx)
				stop := context.AfterFunc(ctx, cancel)
				lead(workCtx)
				stop()
				cancel()
				if ctx.Err() != nil && leaderCtx.Err() == nil && cfg.OnShutdown != nil {
					sctx, cancel := context.WithTimeout(leaderCtx, cfg.ShutdownTimeout)
					cfg.OnShutdown(sctx)
					cancel()
				}
			},
			OnStoppedLeading: func() { log.Info("stopped leading", zap.String("identity", cfg.Identity)) },
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.Info("following", zap.String("leader", id))
				}
			},
		},
	})
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		leading.Lock() // wait for a running leader's work and shutdown
		stopElection()
		leading.Unlock()
	}()
	// A leader that loses its lease (e.g. the apiserver was unreachable past the renew
	// deadline) stands again rather than exiting.
	for electCtx.Err() == nil {
		elector.Run(electCtx)
	}
	return nil
}
