package controller

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qas-dev/qas/decider/decide"
)

// CachedPods returns the pods of namespace ns in c's informer cache, so that
// integration tests can wait for the cache to catch up with what they just did.
func CachedPods(c *Controller, ns string) ([]*corev1.Pod, error) {
	return c.watch.pods.Pods(ns).List(labels.Everything())
}

// SetActHooks sets functions run just before and just after a cycle's action, for
// tests that simulate a crash there.
func SetActHooks(c *Controller, before, after func()) {
	c.beforeAct, c.afterAct = before, after
}

// SetDecideHook sets a function that sees each snapshot the engine decides on,
// for tests of what the controller puts in it.
func SetDecideHook(c *Controller, see func(decide.Snapshot)) { c.beforeDecide = see }

// SetRollHook sets a function run before each write of a routing roll, for tests
// that make another writer change the Deployment in between.
func SetRollHook(c *Controller, before func()) { c.beforeRoll = before }

// AwaitingEvictionState is the migration state a decider saves just before it evicts
// our pod p off its node (which it tainted) to move it, with before the workload's
// pods then: what a decider that stopped between the eviction and saving its outcome
// leaves behind.
func AwaitingEvictionState(p *corev1.Pod, before []types.UID, started time.Time) string {
	data, _ := json.Marshal(migrationState{
		Pod: p.Name, FromNode: p.Spec.NodeName, Mover: decide.MoverOwn, Method: decide.MoveEvict,
		Phase: phaseAwaitingEviction, Started: started, UID: p.UID, BeforeUIDs: before, Tainted: true,
	})
	return string(data)
}

// HoldHotTaint and ReleaseHotTaint are what a migration does to its hot node at its
// start and at its end.
func HoldHotTaint(ctx context.Context, c *Controller, node, holder string) (bool, error) {
	return c.holdHotTaint(ctx, node, holder)
}

func ReleaseHotTaint(ctx context.Context, c *Controller, node, holder string) error {
	return c.releaseHotTaint(ctx, node, holder)
}

// Orphaned reports whether c keeps the deleted QueueAutoscaler ns/name for the undo
// of its unfinished migration.
func Orphaned(c *Controller, ns, name string) bool {
	c.watch.mu.Lock()
	defer c.watch.mu.Unlock()
	return c.watch.orphans[key(ns, name)] != nil
}
