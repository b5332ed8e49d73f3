package measurement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestJudge(t *testing.T) {
	raw := Workload{
		DataTime: t0,
		Pods: []Pod{
			{Name: "web-a", Node: "n1", Time: t0},
			{Name: "web-b", Node: "n2", Time: t0.Add(-5 * time.Second)},
			{Name: "web-gone", Node: "n1", Time: t0},
		},
		Nodes:      []Node{{Name: "n1", Time: t0.Add(-time.Hour), UsedCPU: 1}},
		Neighbours: []Pod{{Name: "ns/db-0", Node: "n1", CPUUsage: 2}},
	}
	for _, tc := range []struct {
		name      string
		q         Query
		maxAge    time.Duration
		pods      []string
		complete  bool
		missing   []string
		summaryOf string
	}{
		{"every ready pod fresh", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a", "web-b"}}, 10 * time.Second,
			[]string{"web-a", "web-b"}, true, nil, ""},
		{"a stale ready pod is missing", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a", "web-b"}}, 4 * time.Second,
			[]string{"web-a"}, false, []string{"pod web-b"}, "no fresh data of pod web-b"},
		{"a stale pod that is not Ready does not count", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a"}}, 4 * time.Second,
			[]string{"web-a"}, true, nil, ""},
		{"no age limit keeps old points", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-b"}}, 0,
			[]string{"web-a", "web-b"}, true, nil, ""},
		{"a ready pod never measured", Query{Pods: []string{"web-a", "web-c"}, Ready: []string{"web-a", "web-c"}}, time.Minute,
			[]string{"web-a"}, false, []string{"pod web-c"}, "pod web-c"},
		{"a node the decision needs has no data", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a"}, NeedNodes: true}, time.Minute,
			[]string{"web-a", "web-b"}, false, []string{"node n2"}, "node n2"},
		{"nodes not needed", Query{Pods: []string{"web-a", "web-b"}, Ready: []string{"web-a"}}, time.Minute,
			[]string{"web-a", "web-b"}, true, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := raw.Judge(tc.q, tc.maxAge)
			var names []string
			for _, p := range got.Pods {
				names = append(names, p.Name)
			}
			require.Equal(t, tc.pods, names, "pods that are gone (web-gone) or stale are left out")
			require.Equal(t, tc.complete, got.Complete)
			require.Equal(t, tc.missing, got.Missing)
			require.Contains(t, got.MissingSummary(), tc.summaryOf)
			n1, ok := got.Node("n1")
			require.True(t, ok, "node points are kept whatever their age")
			require.Equal(t, 1.0, n1.UsedCPU)
			db, ok := got.Neighbour("ns/db-0")
			require.True(t, ok)
			require.Equal(t, 2.0, db.CPUUsage)
			_, ok = got.Neighbour("db-0")
			require.False(t, ok, "neighbours are found by namespace/name only")
		})
	}
	require.Len(t, raw.Pods, 3, "Judge leaves its receiver alone")
}

func TestMissingSummaryIsBounded(t *testing.T) {
	w := Workload{Missing: []string{"pod a", "pod b", "pod c", "pod d", "pod e", "pod f", "pod g"}}
	require.Equal(t, "no fresh data of pod a, pod b, pod c, pod d, pod e and 2 more", w.MissingSummary())
}
