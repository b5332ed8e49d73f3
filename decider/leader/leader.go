// Package leader runs a function only while this process holds a Lease, so that of
// several qas-decider replicas exactly one acts at a time and another takes over when it
// stops.
package leader

import (
	"context"
	"errors"
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
}

// Run blocks until ctx ends, running lead(leaderCtx) whenever this candidate holds the
// lease. leaderCtx is cancelled as soon as leadership is lost, and the lease is released
// on a clean stop so that a successor need not wait for it to expire.
func Run(ctx context.Context, kube kubernetes.Interface, cfg Config, log *zap.Logger, lead func(context.Context)) error {
	if cfg.Namespace == "" || cfg.Name == "" || cfg.Identity == "" {
		return errors.New("leader: namespace, name and identity are required")
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leaderCtx context.Context) {
				log.Info("became leader", zap.String("identity", cfg.Identity))
				lead(leaderCtx)
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
	// A leader that loses its lease (e.g. the apiserver was unreachable past the renew
	// deadline) stands again rather than exiting.
	for ctx.Err() == nil {
		elector.Run(ctx)
	}
	return nil
}
