package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/leader"
)

// TestShutdownUndoesMigrationBeforeReleasingTheLease: a leading decider stopped in
// the middle of a migration (SIGTERM: a rolling update, or QAS being uninstalled)
// undoes it, untainting the node and restoring the replicas, while it still holds
// the Lease, and then releases the Lease.
func TestShutdownUndoesMigrationBeforeReleasingTheLease(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	ctx := context.Background()
	e.spreadDeployment(t, "stop", 2, "500m")
	// A budget that allows no disruption keeps the migration waiting in its surge.
	e.budget(t, "stop", 0)
	e.queueAutoscalerWith(t, "stop", "stop", false, migrationSpec())
	pods := e.pods(t, "stop")
	hot := pods[0].Spec.NodeName
	e.measureHot(pods, hot)

	ctrl := e.newController(t)
	var mu sync.Mutex
	var holderAtShutdown string
	var abortErr error
	cfg := leader.Config{
		Namespace: e.ns, Name: "qas-decider", Identity: "decider-a",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		OnShutdown: func(sctx context.Context) {
			lease, err := e.c.Clientset().CoordinationV1().Leases(e.ns).Get(sctx, "qas-decider", metav1.GetOptions{})
			mu.Lock()
			if err == nil && lease.Spec.HolderIdentity != nil {
				holderAtShutdown = *lease.Spec.HolderIdentity
			}
			mu.Unlock()
			err = ctrl.AbortMigrations(sctx, "the decider is stopping")
			mu.Lock()
			abortErr = err
			mu.Unlock()
		},
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = leader.Run(runCtx, e.c.Clientset(), cfg, zaptest.NewLogger(t), func(lctx context.Context) {
			ctrl.Run(lctx, nil, controller.Hooks{})
		})
	}()
	t.Cleanup(func() { stop(); <-done })

	e.eventually(t, "the leader starts a migration", func() bool {
		return e.get(t, "stop").Annotations[controller.MigrationAnnotation] != "" && e.nodeTainted(t, hot)
	})
	e.waitReplicas(t, "stop", 3)

	stop()
	<-done
	require.NoError(t, runErr)
	mu.Lock()
	require.Equal(t, "decider-a", holderAtShutdown, "the migration is undone while the Lease is held")
	require.NoError(t, abortErr)
	mu.Unlock()
	require.False(t, e.nodeTainted(t, hot), "no taint is left on the node")
	require.Equal(t, int32(2), e.replicas(t, "stop"), "the surge is undone")
	require.Empty(t, e.get(t, "stop").Annotations[controller.MigrationAnnotation])
	require.NotEmpty(t, e.events(t, "MigrationAborted"))
	lease, err := e.c.Clientset().CoordinationV1().Leases(e.ns).Get(ctx, "qas-decider", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", "the Lease is released afterwards")
}

// TestDeletedQueueAutoscalerUndoesItsMigration: deleting a QueueAutoscaler in the
// middle of a migration takes its state with it; the controller, which saw the
// deletion, undoes the migration so that the node does not stay tainted. A standby
// that saw the deletion too and leads later repeats the undo: that changes nothing,
// neither a replica count the user set since nor a taint another migration holds.
func TestDeletedQueueAutoscalerUndoesItsMigration(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	ctx := context.Background()
	e.spreadDeployment(t, "gone", 2, "500m")
	e.budget(t, "gone", 0)
	e.queueAutoscalerWith(t, "gone", "gone", false, migrationSpec())
	pods := e.pods(t, "gone")
	hot := pods[0].Spec.NodeName
	e.measureHot(pods, hot)
	d, err := e.reconcile(t, e.ctrl, "gone")
	require.NoError(t, err)
	require.NotNil(t, d.Migration, d.Explanation.Reason)
	require.True(t, e.nodeTainted(t, hot))
	e.waitReplicas(t, "gone", 3)

	standby := e.newController(t)
	require.NoError(t, e.ctrl.Dynamic.Resource(controller.GVR).Namespace(e.ns).Delete(ctx, "gone", metav1.DeleteOptions{}))
	e.eventually(t, "the deleted QueueAutoscaler's migration is undone", func() bool {
		_, err := e.ctrl.Reconcile(ctx, e.ns, "gone") // what Run does with the key the deletion queued
		return err == nil && !e.nodeTainted(t, hot)
	})
	require.Equal(t, int32(2), e.replicas(t, "gone"), "the surge is undone")
	require.False(t, controller.Orphaned(e.ctrl, e.ns, "gone"), "the leader forgets it once undone")

	// Since then the user scaled the Deployment, and another workload's migration
	// took the same node.
	e.eventually(t, "the standby saw the deletion", func() bool { return controller.Orphaned(standby, e.ns, "gone") })
	_, err = e.c.Clientset().AppsV1().Deployments(e.ns).Patch(ctx, "gone", types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	held, err := controller.HoldHotTaint(ctx, e.ctrl, hot, e.ns+"/other")
	require.NoError(t, err)
	require.True(t, held)
	_, err = standby.Reconcile(ctx, e.ns, "gone") // the standby, leading now, works off its queue
	require.NoError(t, err)
	require.False(t, controller.Orphaned(standby, e.ns, "gone"))
	require.Equal(t, int32(4), e.replicas(t, "gone"), "the user's count stands")
	require.True(t, e.nodeTainted(t, hot), "the other migration still holds the taint")
	require.NoError(t, controller.ReleaseHotTaint(ctx, e.ctrl, hot, e.ns+"/other"))
	require.False(t, e.nodeTainted(t, hot))
}
