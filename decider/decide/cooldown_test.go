package decide

import (
	"encoding/json"
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
		s.ServiceTime = 0.3 // The slowed pod drags the mean.
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
// cooldown (default 5 min, or the spec's), and a restarted engine keeps it.
func TestMigrationCooldown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cooldown time.Duration
		moved    bool
	}{
		{"default after a move", 0, true},
		{"spec's after a move", 10 * time.Minute, true},
		{"after an aborted migration too", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Migration = Migration{Enabled: true, NodeThreshold: 0.8, Cooldown: tc.cooldown}
			spec.Tolerance = 0.5
			want := tc.cooldown
			if want == 0 {
				want = DefaultMigrationCooldown
			}
			e := NewEngine()
			// The pod moved to "cooler"; another pod of ours is slowed on the hot
			// node (which, seen hot, keeps its back-off too).
			e.MigrationEnded("other", t0, tc.moved)
			at := func(d time.Duration) Snapshot { s := hotCluster(); s.Now, s.DataTime = t0.Add(d), t0.Add(d); return s }

			d, err := NewEngineFromState(e.State()).Decide(spec, at(want-time.Second))
			require.NoError(t, err)
			require.Nil(t, d.Migration, "within the cooldown")
			require.Contains(t, migrateNote(d), "cooling down after the migration that ended at "+t0.Format(time.RFC3339))
			require.Contains(t, d.Explanation.Reason, "cooling down")

			d, err = NewEngineFromState(e.State()).Decide(spec, at(want))
			require.NoError(t, err)
			require.NotNil(t, d.Migration, "the cooldown is over: %s", d.Explanation.Reason)
		})
	}
}

// TestNodeBackoff: a node still hot after moves off it waits longer after each:
// cooldown, 2×, 4×, ... capped at an hour; seeing it cool forgets the moves.
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
		for {
			d, err := e.Decide(spec, at(now))
			require.NoError(t, err)
			if d.Migration != nil {
				require.Equal(t, "hot", d.Migration.FromNode)
				break
			}
			require.Contains(t, d.Explanation.Reason, "no migration", "held for a reason it gives")
			now = now.Add(30 * time.Second)
		}
		gaps = append(gaps, now.Sub(start))
		// The neighbour moves; the node stays hot.
		e = NewEngineFromState(e.State()) // restarts keep the back-off
		e.MigrationEnded("hot", now, true)
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
	e.MigrationEnded("hot", now, true)
	blind := at(now.Add(time.Minute))
	blind.Nodes[0].UsedCPU, blind.Complete = 0, false
	_, err = e.Decide(spec, blind)
	require.NoError(t, err)
	require.Len(t, e.State().MovedOff, 1)
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
// annotation), and a state written before it existed reads as none.
func TestMigrationPacingState(t *testing.T) {
	e := NewEngine()
	e.MigrationEnded("n1", t0, true)
	e.MigrationEnded("n1", t0.Add(time.Minute), true)
	e.MigrationEnded("n2", t0.Add(2*time.Minute), false)
	data, err := json.Marshal(e.State())
	require.NoError(t, err)
	var back State
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, t0.Add(2*time.Minute), back.MigrationEnded)
	require.Equal(t, []StateMovedOff{{Node: "n1", Last: t0.Add(time.Minute), Moves: 2}}, back.MovedOff)
	require.Equal(t, e.State(), NewEngineFromState(back).State())

	var old State
	require.NoError(t, json.Unmarshal([]byte(`{"Recommendations":null,"ScaleEvents":null}`), &old))
	require.Equal(t, State{}, NewEngineFromState(old).State())
	data, err = json.Marshal(NewEngine().State())
	require.NoError(t, err)
	require.JSONEq(t, `{"Recommendations":null,"ScaleEvents":null}`, string(data), "no pacing, nothing written")
}
