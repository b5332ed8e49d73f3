package decide

import (
	"fmt"
	"slices"
	"time"
)

// Migration pacing. A move takes a pod off a hot node; whether it helped shows
// only afterwards. Two rules keep the engine from moving pod after pod:
//
//   - Cooldown: after a migration of the workload ended (moved, incomplete or
//     aborted), no migration is planned for Migration.Cooldown.
//   - Per-node back-off: a node that is still hot after a completed move off it
//     (it was not seen at or under φ since) waits Cooldown × 2^(k−1) after its
//     k-th such move before the next one, at most MaxNodeBackoff (or the
//     cooldown, if longer). Seeing the node cool forgets its moves.
//
// Both are kept in the Engine's State, so a restarted decider keeps them.
const (
	DefaultMigrationCooldown = 5 * time.Minute
	// MaxNodeBackoff caps the per-node back-off: a node that stays hot whatever
	// is moved off it sees at most one move an hour.
	MaxNodeBackoff = time.Hour
)

// movedOff is a node the workload moved pods off that has not been seen cool
// since.
type movedOff struct {
	node  string
	last  int64 // unix nanoseconds: when the last move off it ended
	moves int
}

// StateMovedOff is a node moved off, in the Engine's State.
type StateMovedOff struct {
	Node string
	// Last is when the last move off the node ended.
	Last time.Time
	// Moves are the completed moves off the node since it was last seen cool.
	Moves int
}

// MigrationEnded records that a migration off node from ended at t: no
// migration is planned for the spec's cooldown after t. moved says whether the
// pod did leave the node (a completed move); a completed move counts towards
// the node's back-off until the node is seen cool. The caller persists State.
func (e *Engine) MigrationEnded(from string, t time.Time, moved bool) {
	at := t.UnixNano()
	e.migrationEnded = max(e.migrationEnded, at)
	if !moved {
		return
	}
	for i := range e.movedOff {
		if e.movedOff[i].node == from {
			e.movedOff[i].moves++
			e.movedOff[i].last = max(e.movedOff[i].last, at)
			return
		}
	}
	e.movedOff = append(e.movedOff, movedOff{node: from, last: at, moves: 1})
}

// migrationCooldown returns why no migration may start at now ("" when one may).
func (e *Engine) migrationCooldown(cooldown time.Duration, now time.Time) string {
	if e.migrationEnded == 0 {
		return ""
	}
	ended := time.Unix(0, e.migrationEnded).UTC()
	until := ended.Add(cooldown)
	if !now.Before(until) {
		return ""
	}
	return fmt.Sprintf("cooling down after the migration that ended at %s: the next may start at %s (cooldown %s)",
		ended.Format(time.RFC3339), until.Format(time.RFC3339), cooldown)
}

// nodeHold returns the per-node back-off rule for planMigration at now.
func (e *Engine) nodeHold(cooldown time.Duration, now time.Time) func(string) string {
	return func(node string) string {
		i := slices.IndexFunc(e.movedOff, func(m movedOff) bool { return m.node == node })
		if i < 0 {
			return ""
		}
		m := e.movedOff[i]
		wait := nodeBackoff(cooldown, m.moves)
		last := time.Unix(0, m.last).UTC()
		if !now.Before(last.Add(wait)) {
			return ""
		}
		return fmt.Sprintf("node %s is still hot after %d move(s) off it, the last ended at %s: the next move off it waits until %s (back-off %s, doubling per move)",
			node, m.moves, last.Format(time.RFC3339), last.Add(wait).Format(time.RFC3339), wait)
	}
}

// nodeBackoff is the wait after the k-th move off a node that did not cool it:
// cooldown × 2^(k−1), capped at max(MaxNodeBackoff, cooldown).
func nodeBackoff(cooldown time.Duration, k int) time.Duration {
	limit := max(MaxNodeBackoff, cooldown)
	wait := cooldown
	for i := 1; i < k && wait < limit; i++ {
		wait *= 2
	}
	return min(wait, limit)
}

// forgetCooledNodes drops the back-off of nodes seen at or under φ (the moves
// cooled them) and of nodes that are gone. It trusts only complete data: a
// node whose usage is missing reads as idle.
func (e *Engine) forgetCooledNodes(threshold float64, snap Snapshot) {
	if !snap.Complete || len(e.movedOff) == 0 {
		return
	}
	e.movedOff = slices.DeleteFunc(e.movedOff, func(m movedOff) bool {
		i := slices.IndexFunc(snap.Nodes, func(n Node) bool { return n.Name == m.node })
		return i < 0 || nodeUtil(snap.Nodes[i]) <= threshold
	})
}
