package policy

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// oracleWorld applies an oracle's decisions to a pod list the way the
// simulator does: new pods start at once (each one start), removals take the
// newest first.
type oracleWorld struct {
	pods   []Pod
	starts int
}

func (w *oracleWorld) step(o *Oracle, now float64) int {
	d := o.Decide(&Observation{Now: now, Pods: w.pods, PodStarts: w.starts})
	for len(w.pods) < d.Replicas {
		w.pods = append(w.pods, Pod{ID: 1000 + w.starts})
		w.starts++
	}
	w.pods = w.pods[:d.Replicas]
	return d.Replicas
}

func TestOracleStartsPodsJustInTime(t *testing.T) {
	for _, tc := range []struct {
		name  string
		need  []int
		inits []float64
		// want is the desired count decided at each time 1, 2, … (the
		// decision at time t acts from second t on).
		want []int
	}{
		{
			// Init 3 s: the 3 pods second 8 needs start at time 5 (Ready at 8);
			// the need drops at second 11 and nothing more is needed within 3 s.
			name:  "constant init",
			need:  []int{1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1},
			inits: []float64{3},
			want:  []int{1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1},
		},
		{
			// A dip shorter than the init time keeps the pods (removing and
			// starting them again would cost more); a longer one does not, and
			// the pods for second 12 start at time 9.
			name:  "keep through a short dip only",
			need:  []int{3, 3, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 3, 3},
			inits: []float64{3},
			want:  []int{3, 3, 3, 3, 3, 1, 1, 1, 3, 3, 3, 3, 3},
		},
		{
			// Start 0 takes 2 s and start 1 takes 6 s, both needed from second
			// 10: start 1 must begin by time 4, and start 0 before it.
			name:  "realised init times per start",
			need:  []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3},
			inits: []float64{2, 6, 2, 2},
			want:  []int{1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inits := tc.inits
			o := NewOracle(Params{MinReplicas: 1, MaxReplicas: 100}, Future{Need: tc.need, InitTime: func(j int) float64 {
				return inits[min(j, len(inits)-1)]
			}})
			w := &oracleWorld{pods: make([]Pod, tc.need[0])}
			var got []int
			for now := 1; now < len(tc.need); now++ {
				got = append(got, w.step(o, float64(now)))
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestOracleRouting: the oracle is Service-routed; oracle-pooled goes
// through the activator when its future says so.
func TestOracleRouting(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         *Oracle
		pooled    bool
		activator bool
	}{
		{name: "oracle", o: NewOracle(params, Future{})},
		{name: "oracle-pooled", o: NewPooledOracle(params, Future{}), pooled: true},
		{name: "oracle-pooled", o: NewPooledOracle(params, Future{Activator: true}), pooled: true, activator: true},
	} {
		require.Equal(t, tc.name, tc.o.Name())
		require.Equal(t, tc.pooled, tc.o.Pooled())
		require.Equal(t, tc.activator, tc.o.ActivatorRouting())
	}
}
