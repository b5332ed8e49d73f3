package controller_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/decide"
)

// decisionLog returns the heldBecause of every "decision" log line for name.
func decisionLog(logs *observer.ObservedLogs, name string) []string {
	var out []string
	for _, entry := range logs.FilterMessage("decision").All() {
		f := entry.ContextMap()
		if qa, _ := f["queueautoscaler"].(string); strings.HasSuffix(qa, "/"+name) {
			held, _ := f["heldBecause"].(string)
			out = append(out, held)
		}
	}
	return out
}

func (e *env) setDryRun(t *testing.T, name string, on bool) {
	patch := []byte(`{"spec":{"dryRun":false}}`)
	if on {
		patch = []byte(`{"spec":{"dryRun":true}}`)
	}
	_, err := e.ctrl.Dynamic.Resource(controller.GVR).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// TestEveryCycleIsRecorded: cycles that never reach the engine (an invalid spec, a
// target that cannot be read, a migration under way, one frozen by dry run) are
// recorded like decisions: in the log, the sink and status.lastDecision, with why.
func TestEveryCycleIsRecorded(t *testing.T) {
	e := setup(t)
	e.removeHotTaint(t)
	sink := &recordingSink{}
	core, logs := observer.New(zap.InfoLevel)
	ctrl := e.startController(t, e.c.Config, sink, func(c *controller.Controller) { c.Log = zap.New(core) })
	lastHeld := func(name string) string {
		ds := sink.since(0, name)
		require.NotEmpty(t, ds, "%s: a decision is recorded", name)
		held := decisionLog(logs, name)
		require.Len(t, held, len(ds), "%s: one decision log line per recorded decision", name)
		require.Equal(t, ds[len(ds)-1].Explanation.HeldBecause, held[len(held)-1])
		return ds[len(ds)-1].Explanation.HeldBecause
	}

	t.Run("invalid spec", func(t *testing.T) {
		e.deployment(t, "invalid", 1)
		// The schema accepts it; the engine needs minCPU once vertical is on.
		e.queueAutoscalerWith(t, "invalid", "invalid", false, map[string]any{"vertical": map[string]any{"enabled": true}})
		d, err := e.reconcile(t, ctrl, "invalid")
		require.NoError(t, err, "an invalid spec is reported, not retried")
		require.Equal(t, decide.ActionNone, d.Action)
		require.Contains(t, lastHeld("invalid"), "invalid spec")
		require.Contains(t, lastHeld("invalid"), "spec.vertical.minCPU")
		qa := e.get(t, "invalid")
		require.Equal(t, "InvalidSpec", condition(qa, "Ready").Reason)
		require.Contains(t, qa.Status.LastDecision.Reason, "held: invalid spec")
	})

	t.Run("target missing", func(t *testing.T) {
		e.queueAutoscaler(t, "orphan", "no-such-deployment", false)
		_, err := e.reconcile(t, ctrl, "orphan")
		require.Error(t, err)
		require.Contains(t, lastHeld("orphan"), "cannot read the target's scale")
		require.Equal(t, "FailedGetScale", condition(e.get(t, "orphan"), "AbleToScale").Reason)
	})

	t.Run("migration under way, frozen by dry run", func(t *testing.T) {
		e.spreadDeployment(t, "moving", 2, "500m")
		e.queueAutoscalerWith(t, "moving", "moving", false, migrationSpec())
		pods := e.pods(t, "moving")
		hot := pods[0].Spec.NodeName
		e.measureHot(pods, hot)
		d, err := e.reconcile(t, ctrl, "moving")
		require.NoError(t, err)
		require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
		e.waitReplicas(t, "moving", 3)
		state := e.get(t, "moving").Annotations[controller.MigrationAnnotation]
		require.Contains(t, state, `"phase":"surging"`)

		// Dry run freezes it: reported, not advanced, though the replacement is Ready.
		e.setDryRun(t, "moving", true)
		d, err = e.reconcile(t, ctrl, "moving")
		require.NoError(t, err)
		require.Equal(t, decide.ActionNone, d.Action)
		require.Contains(t, lastHeld("moving"), "migration frozen by dry run")
		qa := e.get(t, "moving")
		require.Equal(t, state, qa.Annotations[controller.MigrationAnnotation], "the migration did not move on")
		require.Equal(t, int32(3), e.replicas(t, "moving"), "the surge is neither finished nor undone")
		require.True(t, e.nodeTainted(t, hot))
		require.True(t, qa.Status.LastDecision.DryRun)
		require.Equal(t, "Migrating", condition(qa, "ScalingActive").Reason)

		// Dry run off: it goes on, and the cycle that advances it is recorded too.
		e.setDryRun(t, "moving", false)
		_, err = e.reconcile(t, ctrl, "moving")
		require.NoError(t, err)
		require.Contains(t, lastHeld("moving"), "migration in progress: moving "+pods[0].Name+" off hot node "+hot)
		require.Equal(t, int32(2), e.replicas(t, "moving"), "replacement Ready: scaled back")
		qa = e.get(t, "moving")
		require.Contains(t, qa.Annotations[controller.MigrationAnnotation], `"phase":"draining"`)
		require.Contains(t, qa.Status.LastDecision.Reason, "held: migration in progress")
	})
}
