package decide

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func migrateNote(d Decision) string {
	for _, c := range d.Explanation.Candidates {
		if c.Kind == CandidateMigrate {
			return c.Note
		}
	}
	return ""
}

// TestMoveMethodFollowsThePod: the plan carries how the pod moves, and a pod that
// cannot be moved is not planned: the reason says why, and the engine sizes for
// the slowed pod instead (horizontal fallback).
func TestMoveMethodFollowsThePod(t *testing.T) {
	spec := baseSpec()
	spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8}
	spec.Tolerance = 0.5
	for _, tc := range []struct {
		name   string
		mover  Mover
		set    func(*Snapshot)
		method MoveMethod
		pod    string
		note   string
	}{
		{name: "any (simulator)", mover: MoverOwn, set: func(*Snapshot) {}, method: MoveAny, pod: "web-a"},
		{name: "surge", mover: MoverOwn, set: func(s *Snapshot) { s.Pods[0].Move = MoveSurge }, method: MoveSurge, pod: "web-a"},
		{name: "evict", mover: MoverOwn, set: func(s *Snapshot) { s.Pods[0].Move = MoveEvict }, method: MoveEvict, pod: "web-a"},
		{name: "own pod cannot move", mover: MoverOwn, set: func(s *Snapshot) {
			s.Pods[0].Move, s.Pods[0].NoMove = MoveNone, "it has no controller that would recreate it on another node"
		}, note: "cannot move web-a off hot: it has no controller that would recreate it on another node"},
		{name: "unmovable neighbour skipped for the next biggest", mover: MoverNeighbour, set: func(s *Snapshot) {
			s.Nodes[0].Pods[1].Move, s.Nodes[0].Pods[1].NoMove = MoveNone, "a DaemonSet's pod stays on its node"
			s.Nodes[0].Pods[0].Move = MoveEvict
		}, method: MoveEvict, pod: "batch-small"},
		{name: "neighbour being deleted skipped for the next biggest", mover: MoverNeighbour, set: func(s *Snapshot) {
			s.Nodes[0].Pods[1].Terminating = true
		}, pod: "batch-small"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := spec
			sp.Migration.Mover = tc.mover
			s := hotCluster()
			tc.set(&s)
			d, err := NewEngine().Decide(sp, s)
			require.NoError(t, err)
			if tc.note != "" {
				require.Nil(t, d.Migration)
				require.False(t, d.Action.Has(ActionMigrate))
				require.Contains(t, migrateNote(d), tc.note)
				require.Contains(t, d.Explanation.Reason, tc.note, "the reason says why there is no migration")
				require.InDelta(t, s.ServiceTime, d.Explanation.ServiceTime, 1e-12, "sized for the slowed pods as they are")
				return
			}
			require.NotNil(t, d.Migration, d.Explanation.Reason)
			require.Equal(t, tc.pod, d.Migration.Pod)
			require.Equal(t, tc.method, d.Migration.Method)
		})
	}

	t.Run("falls back to horizontal scaling", func(t *testing.T) {
		sp := spec
		sp.Tolerance = 0.1
		s := hotCluster()
		// The slowed pod drags the mean (0.3, 0.1 and 0.1 s: 0.167 s, above
		// the 120 ms target); moved, the mean is 0.1 s.
		for i := range s.ArrivalRates {
			s.ArrivalRates[i].Rate = 12
		}
		d, err := NewEngine().Decide(sp, s)
		require.NoError(t, err)
		require.NotNil(t, d.Migration, "movable: migrate first")
		require.False(t, d.Action.Has(ActionHorizontal), d.Explanation.Reason)
		s.Pods[0].Move, s.Pods[0].NoMove = MoveNone, "no controller"
		d, err = NewEngine().Decide(sp, s)
		require.NoError(t, err)
		require.Nil(t, d.Migration)
		require.True(t, d.Action.Has(ActionHorizontal), d.Explanation.Reason)
		require.Greater(t, d.DesiredReplicas, int32(3))
	})
}

// TestMigrationCooldown: after a migration ended, none is planned for the
// cooldown (default 5 min, or the spec's), and a restarted engine keeps it. The
// neighbour mover always cools down; the own mover only when the move did not
// make progress: it ended without moving its pod, or the workload's pods on its
// node did not fall below their count when it was planned.
func TestMigrationCooldown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mover    Mover
		cooldown time.Duration
		from     string
		moved    bool
		before   int // the workload's pods on from when the move was planned
		note     string
	}{
		{name: "neighbour: default after a move", mover: MoverNeighbour, from: "hot", moved: true, before: 2, note: "cooling down after the migration that ended at " + t0.Format(time.RFC3339) + ": the next"},
		{name: "neighbour: spec's after a move", mover: MoverNeighbour, cooldown: 10 * time.Minute, from: "hot", moved: true, before: 2, note: "(cooldown 10m0s)"},
		{name: "neighbour: after an aborted migration too", mover: MoverNeighbour, from: "hot", note: "cooling down"},
		{name: "own: after an aborted migration", mover: MoverOwn, from: "hot", before: 1,
			note: "cooling down after the migration that ended at " + t0.Format(time.RFC3339) + " without moving its pod off hot (incomplete or aborted)"},
		{name: "own: after a move that did not reduce our pods on its node", mover: MoverOwn, cooldown: 10 * time.Minute, from: "hot", moved: true, before: 1,
			note: "which did not reduce the workload's pods on hot (1 there now, 1 when the move was planned)"},
		{name: "own: after a move whose count is not known", mover: MoverOwn, from: "hot", moved: true,
			note: "(1 there now; how many there were when the move was planned is not known)"},
		{name: "own: after a move that did, none", mover: MoverOwn, from: "hot", moved: true, before: 2},
		{name: "own: after a move off a node seen cool since, none", mover: MoverOwn, from: "cool", moved: true, before: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8, Cooldown: tc.cooldown, Mover: tc.mover}
			spec.Tolerance = 0.5
			want := tc.cooldown
			if want == 0 {
				want = DefaultMigrationCooldown
			}
			e := NewEngine()
			// A pod moved off tc.from; another pod of ours is slowed on the hot
			// node (which, seen hot, keeps its back-off too).
			e.MigrationEnded(MigrationPlan{Pod: "web-x", FromNode: tc.from, ToNode: "cooler", Mover: tc.mover, PodsOnNode: tc.before}, t0, tc.moved)
			at := func(d time.Duration) Snapshot { s := hotCluster(); s.Now, s.DataTime = t0.Add(d), t0.Add(d); return s }

			d, err := NewEngineFromState(e.State()).Decide(spec, at(want-time.Second))
			require.NoError(t, err)
			if tc.note == "" {
				require.NotNil(t, d.Migration, "progress: the next move at once: %s", d.Explanation.Reason)
				return
			}
			require.Nil(t, d.Migration, "within the cooldown")
			require.Contains(t, migrateNote(d), tc.note)
			require.Contains(t, d.Explanation.Reason, tc.note, "the reason says why")

			d, err = NewEngineFromState(e.State()).Decide(spec, at(want))
			require.NoError(t, err)
			require.NotNil(t, d.Migration, "the cooldown is over: %s", d.Explanation.Reason)
		})
	}
}

// TestNodeBackoff: with the neighbour mover, a node still hot after moves off
// it waits longer after each: cooldown, 2×, 4×, ... capped at an hour; seeing
// it cool forgets the moves.
func TestNodeBackoff(t *testing.T) {
	spec := baseSpec()
	spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8, Mover: MoverNeighbour}
	spec.Tolerance = 0.5
	at := func(now time.Time) Snapshot { s := hotCluster(); s.Now, s.DataTime = now, now; return s }

	e := NewEngine()
	now := t0
	var gaps []time.Duration
	for range 7 {
		// Find the first instant a move off "hot" is planned, in 30 s steps.
		start := now
		var plan *MigrationPlan
		for {
			d, err := e.Decide(spec, at(now))
			require.NoError(t, err)
			if plan = d.Migration; plan != nil {
				require.Equal(t, "hot", plan.FromNode)
				break
			}
			require.Contains(t, d.Explanation.Reason, "no migration", "held for a reason it gives")
			now = now.Add(30 * time.Second)
		}
		gaps = append(gaps, now.Sub(start))
		// The neighbour moves; the node stays hot.
		e = NewEngineFromState(e.State()) // restarts keep the back-off
		e.MigrationEnded(*plan, now, true)
	}
	require.Equal(t, []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute, time.Hour, time.Hour}, gaps)
	d, err := e.Decide(spec, at(now.Add(5*time.Minute)))
	require.NoError(t, err)
	require.Contains(t, migrateNote(d), "node hot is still hot after 7 move(s) off it")

	// The node is seen cool once: its moves are forgotten, only the cooldown remains.
	cool := at(now.Add(time.Minute))
	cool.Nodes[0].UsedCPU = 1
	_, err = e.Decide(spec, cool)
	require.NoError(t, err)
	require.Empty(t, e.State().MovedOff)
	d, err = e.Decide(spec, at(now.Add(5*time.Minute)))
	require.NoError(t, err)
	require.NotNil(t, d.Migration, d.Explanation.Reason)

	// Incomplete data does not count as cool.
	e.MigrationEnded(*d.Migration, now, true)
	blind := at(now.Add(time.Minute))
	blind.Nodes[0].UsedCPU, blind.Complete = 0, false
	_, err = e.Decide(spec, blind)
	require.NoError(t, err)
	require.Len(t, e.State().MovedOff, 1)
}

// ownOnHot is hotCluster at now with onHot of the workload's pods on the hot
// node, all slowed, and deleting more there being deleted (slowed too).
func ownOnHot(now time.Time, onHot, deleting int) Snapshot {
	s := hotCluster()
	s.Now, s.DataTime = now, now
	s.Pods = slices.Clone(s.Pods[1:]) // the healthy ones, on the cool nodes
	for i := range onHot + deleting {
		s.Pods = append(s.Pods, Pod{Name: fmt.Sprintf("web-hot-%d", i), Node: "hot", Owned: true, CPURequest: 500,
			CPUUsage: 0.5, ThrottledFraction: 0.3, ServiceTime: 0.3, Terminating: i < deleting})
	}
	s.CurrentReplicas, s.ReadyReplicas = int32(len(s.Pods)-deleting), int32(len(s.Pods)-deleting)
	return s
}

// TestOwnMoverPacing: the own mover moves slowed pod after slowed pod off a
// hot node at once while each move reduces the workload's pods there (the
// moved pod still being deleted does not count); when pods land there again
// (scale-ups placed on the hot node) it backs off, cooldown × 2^(k−1) after the
// k-th move in a row without progress, and a move that makes progress starts
// the count over. A restarted engine keeps all of it.
func TestOwnMoverPacing(t *testing.T) {
	spec := baseSpec()
	spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8}
	spec.Tolerance = 0.5
	e := NewEngine()
	now := t0
	var ended time.Time
	for i, step := range []struct {
		onHot, deleting int // the workload's pods on the hot node while the engine waits
		wait            time.Duration
		note            string // in the reason while it waits
	}{
		{onHot: 4},
		{onHot: 3, deleting: 1}, // the move took one off (still being deleted): progress, the next at once
		{onHot: 3, wait: 5 * time.Minute, // a scale-up landed there: no progress
			note: "which did not reduce the workload's pods on hot (3 there now, 3 when the move was planned)"},
		{onHot: 3, wait: 10 * time.Minute,
			note: "node hot: 2 move(s) off it in a row did not reduce the workload's pods there (3 there now, 3 when the move was planned)"},
		{onHot: 3, wait: 20 * time.Minute, note: "(back-off 20m0s, doubling per move without progress)"},
		{onHot: 2}, // progress again: at once
		{onHot: 2, wait: 5 * time.Minute, note: "cooling down"}, // the count started over
	} {
		start := now
		var plan *MigrationPlan
		var held string // the last reason before the move
		for {
			d, err := e.Decide(spec, ownOnHot(now, step.onHot, step.deleting))
			require.NoError(t, err)
			if plan = d.Migration; plan != nil {
				break
			}
			held = d.Explanation.Reason
			require.Contains(t, held, "no migration", "step %d: held for a reason it gives", i)
			if now.Sub(start) >= 5*time.Minute {
				require.NotContains(t, held, "cooling down after", "step %d: the workload's cooldown is over, the node's back-off holds", i)
			}
			now = now.Add(30 * time.Second)
		}
		require.Contains(t, held, step.note, "step %d", i)
		require.Equal(t, step.wait, now.Sub(start), "step %d: %s", i, plan.Pod)
		require.Equal(t, "hot", plan.FromNode)
		require.Equal(t, step.onHot, plan.PodsOnNode, "step %d: pods being deleted do not count", i)
		if step.deleting > 0 {
			require.NotEqual(t, "web-hot-0", plan.Pod, "step %d: a pod being deleted is not moved", i)
		}
		// The move takes a minute; a restarted engine hears of its end.
		now = now.Add(time.Minute)
		e = NewEngineFromState(e.State())
		e.MigrationEnded(*plan, now, true)
		ended = now
	}
	st := e.State()
	require.Equal(t, []StateMovedOff{{Node: "hot", Last: ended, Moves: 7, Pods: 2, Stalled: 1}}, st.MovedOff, "the move before the last made no progress")
	require.Equal(t, "hot", st.MigrationFrom)
	require.True(t, st.MigrationMoved)

	t.Run("an aborted move cools down but does not count towards the node", func(t *testing.T) {
		e := NewEngineFromState(st)
		e.MigrationEnded(MigrationPlan{Pod: "web-hot-1", FromNode: "hot", PodsOnNode: 1}, ended.Add(time.Hour), false)
		d, err := e.Decide(spec, ownOnHot(ended.Add(time.Hour+time.Minute), 1, 0))
		require.NoError(t, err)
		require.Nil(t, d.Migration)
		require.Contains(t, d.Explanation.Reason, "without moving its pod off hot (incomplete or aborted)")
		require.Equal(t, st.MovedOff, e.State().MovedOff)
		d, err = e.Decide(spec, ownOnHot(ended.Add(time.Hour+5*time.Minute), 1, 0))
		require.NoError(t, err)
		require.NotNil(t, d.Migration, "1 of ours there now, 2 when the last completed move was planned: progress; %s", d.Explanation.Reason)
	})
}

func TestNodeBackoffSteps(t *testing.T) {
	for _, tc := range []struct {
		cooldown time.Duration
		k        int
		want     time.Duration
	}{
		{5 * time.Minute, 1, 5 * time.Minute},
		{5 * time.Minute, 2, 10 * time.Minute},
		{5 * time.Minute, 5, 60 * time.Minute},
		{5 * time.Minute, 1000, time.Hour},
		{2 * time.Hour, 3, 2 * time.Hour}, // a cooldown longer than the cap is the cap
	} {
		require.Equal(t, tc.want, nodeBackoff(tc.cooldown, tc.k), "cooldown %s, move %d", tc.cooldown, tc.k)
	}
}

// TestMigrationPacingState: the pacing survives JSON (the controller's
// annotation), and a state written before parts of it existed reads as none of
// them: the own mover then backs off as the neighbour's does.
func TestMigrationPacingState(t *testing.T) {
	e := NewEngine()
	e.MigrationEnded(MigrationPlan{FromNode: "n1", PodsOnNode: 3}, t0, true)
	e.MigrationEnded(MigrationPlan{FromNode: "n1", PodsOnNode: 3}, t0.Add(time.Minute), true)
	e.MigrationEnded(MigrationPlan{FromNode: "n2", PodsOnNode: 1}, t0.Add(2*time.Minute), false)
	data, err := json.Marshal(e.State())
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, t0.Add(2*time.Minute), back.MigrationEnded)
	require.Equal(t, "n2", back.MigrationFrom)
	require.False(t, back.MigrationMoved)
	require.Equal(t, []StateMovedOff{{Node: "n1", Last: t0.Add(time.Minute), Moves: 2, Pods: 3, Stalled: 1}}, back.MovedOff)
	require.Equal(t, e.State(), NewEngineFromState(back).State())

	var old State
	require.NoError(t, json.Unmarshal([]byte(`{"Recommendations":null,"ScaleEvents":null}`), &old))
	require.Equal(t, State{}, NewEngineFromState(old).State())
	data, err = json.Marshal(NewEngine().State())
	require.NoError(t, err)
	require.JSONEq(t, `{"Recommendations":null,"ScaleEvents":null}`, string(data), "no pacing, nothing written")

	// Written before the outcome and the pod counts were kept: two completed
	// moves off the hot node, which is still hot. The own mover cools down.
	require.NoError(t, json.Unmarshal([]byte(`{"Recommendations":null,"ScaleEvents":null,"MigrationEnded":"`+t0.Format(time.RFC3339)+
		`","MovedOff":[{"Node":"hot","Last":"`+t0.Format(time.RFC3339)+`","Moves":2}]}`), &old))
	spec := baseSpec()
	spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8}
	spec.Tolerance = 0.5
	at := func(d time.Duration) Snapshot { s := hotCluster(); s.Now, s.DataTime = t0.Add(d), t0.Add(d); return s }
	d, err := NewEngineFromState(old).Decide(spec, at(4*time.Minute))
	require.NoError(t, err)
	require.Nil(t, d.Migration)
	require.Contains(t, d.Explanation.Reason, "cooling down after the migration that ended at "+t0.Format(time.RFC3339)+": the next")
	d, err = NewEngineFromState(old).Decide(spec, at(5*time.Minute))
	require.NoError(t, err)
	require.NotNil(t, d.Migration, "the node's back-off counts the moves without progress, unknown here: one step; %s", d.Explanation.Reason)
}
