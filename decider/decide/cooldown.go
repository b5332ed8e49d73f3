package decide

import (
	"fmt"
	"slices"
	"time"
)

// Migration pacing. A move takes a pod off a hot node; whether it helped shows
// only afterwards. The rules follow the mover's purpose.
//
// The neighbour mover moves other pods to cool the node, so a node that stays
// hot means the moves did not help:
//
//   - Cooldown: after a migration of the workload ended (moved, incomplete or
//     aborted), no migration is planned for Migration.Cooldown.
//   - Per-node back-off: a node that is still hot after a completed move off it
//     (it was not seen at or under φ since) waits Cooldown × 2^(k−1) after its
//     k-th such move before the next one, at most MaxNodeBackoff (or the
//     cooldown, if longer).
//
// The own mover moves the workload's slowed pods off a node that others make
// hot: the node staying hot is expected, and a completed move that reduced the
// workload's pods on the node (fewer there now than when the move was planned)
// is progress, after which the next move may start at once. It backs off only
// when moves make no progress:
//
//   - Cooldown: after a migration that ended incomplete or aborted, or a
//     completed one after which the workload's pods on its node did not fall
//     (new pods landed there, e.g. scale-ups the scheduler placed on it).
//   - Per-node back-off: Cooldown × 2^(k−1) after the k-th completed move in a
//     row off the node that did not reduce the workload's pods there, capped as
//     above; a move that did resets the count.
//
// Seeing a node cool forgets its moves. All of it is kept in the Engine's
// State, so a restarted decider keeps it.
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
	// pods is the workload's pods on the node when the last move off it was
	// planned (0: not known).
	pods int
	// stalled counts the completed moves in a row before the last one that did
	// not reduce the workload's pods on the node.
	stalled int
}

// progressed reports whether the workload's pods on the node, now, are fewer
// than when the last move off it was planned.
func (m movedOff) progressed(now int) bool { return m.pods > 0 && now < m.pods }

// StateMovedOff is a node moved off, in the Engine's State.
type StateMovedOff struct {
	Node string
	// Last is when the last move off the node ended.
	Last time.Time
	// Moves are the completed moves off the node since it was last seen cool.
	Moves int
	// Pods is the number of the workload's pods on the node when the last move
	// off it was planned (zero: not known, as in a state written before it was
	// kept).
	Pods int `json:",omitempty"`
	// Stalled counts the completed moves off the node in a row, before the last
	// one, that did not reduce the workload's pods there (the own mover's
	// back-off).
	Stalled int `json:",omitempty"`
}

// MigrationEnded records that the migration of plan (as planned, or as the
// caller kept it: FromNode and PodsOnNode are used) ended at t: the cooldown
// counts from t. moved says whether the pod did leave the node (a completed
// move); a completed move counts towards the node's back-off until the node is
// seen cool, and the own mover compares plan.PodsOnNode with the workload's
// pods there afterwards to tell whether the move made progress. The caller
// persists State.
func (e *Engine) MigrationEnded(plan MigrationPlan, t time.Time, moved bool) {
	at := t.UnixNano()
	if at >= e.migrationEnded {
		e.migrationEnded = at
		e.lastFrom, e.lastMoved = plan.FromNode, moved
	}
	if !moved {
		return
	}
	i := slices.IndexFunc(e.movedOff, func(m movedOff) bool { return m.node == plan.FromNode })
	if i < 0 {
		e.movedOff = append(e.movedOff, movedOff{node: plan.FromNode})
		i = len(e.movedOff) - 1
	}
	m := &e.movedOff[i]
	if m.moves > 0 {
		// Did the move before this one make progress? The workload's pods there
		// when this one was planned tell.
		if m.progressed(plan.PodsOnNode) && plan.PodsOnNode > 0 {
			m.stalled = 0
		} else {
			m.stalled++
		}
	}
	m.moves++
	m.last = max(m.last, at)
	m.pods = plan.PodsOnNode
}

// ownPodsOn counts the workload's pods on each node, those being deleted left
// out (they leave anyway).
func ownPodsOn(snap Snapshot) map[string]int {
	out := map[string]int{}
	for _, p := range snap.Pods {
		if p.Node != "" && !p.Terminating {
			out[p.Node]++
		}
	}
	return out
}

// migrationCooldown returns why no migration may start at now ("" when one
// may). pods are the workload's pods per node now.
func (e *Engine) migrationCooldown(mig Migration, pods map[string]int, now time.Time) string {
	if e.migrationEnded == 0 {
		return ""
	}
	ended := time.Unix(0, e.migrationEnded).UTC()
	until := ended.Add(mig.Cooldown)
	if !now.Before(until) {
		return ""
	}
	why := ""
	if mig.Mover == MoverOwn {
		switch {
		case e.lastFrom == "":
			// A state written before the outcome was kept: cool down, as then.
		case !e.lastMoved:
			why = fmt.Sprintf(" without moving its pod off %s (incomplete or aborted)", e.lastFrom)
		default:
			i := slices.IndexFunc(e.movedOff, func(m movedOff) bool { return m.node == e.lastFrom })
			if i < 0 {
				return "" // the node was seen cool since (or is gone): progress
			}
			m := e.movedOff[i]
			if m.progressed(pods[m.node]) {
				return ""
			}
			why = ", which did not reduce the workload's pods on " + m.node + " " + podCounts(m, pods[m.node])
		}
	}
	return fmt.Sprintf("cooling down after the migration that ended at %s%s: the next may start at %s (cooldown %s)",
		ended.Format(time.RFC3339), why, until.Format(time.RFC3339), mig.Cooldown)
}

// podCounts says how the workload's pods on m's node compare, for reasons.
func podCounts(m movedOff, now int) string {
	if m.pods == 0 {
		return fmt.Sprintf("(%d there now; how many there were when the move was planned is not known)", now)
	}
	return fmt.Sprintf("(%d there now, %d when the move was planned)", now, m.pods)
}

// nodeHold returns the per-node back-off rule for planMigration at now; pods
// are the workload's pods per node now.
func (e *Engine) nodeHold(mig Migration, pods map[string]int, now time.Time) func(string) string {
	return func(node string) string {
		i := slices.IndexFunc(e.movedOff, func(m movedOff) bool { return m.node == node })
		if i < 0 {
			return ""
		}
		m := e.movedOff[i]
		last := time.Unix(0, m.last).UTC()
		if mig.Mover == MoverOwn {
			if m.progressed(pods[node]) {
				return ""
			}
			k := m.stalled + 1
			wait := nodeBackoff(mig.Cooldown, k)
			if !now.Before(last.Add(wait)) {
				return ""
			}
			return fmt.Sprintf("node %s: %d move(s) off it in a row did not reduce the workload's pods there %s, the last ended at %s: the next move off it waits until %s (back-off %s, doubling per move without progress)",
				node, k, podCounts(m, pods[node]), last.Format(time.RFC3339), last.Add(wait).Format(time.RFC3339), wait)
		}
		wait := nodeBackoff(mig.Cooldown, m.moves)
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
