package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/policy"
)

func TestNodes(t *testing.T) {
	svc, err := ParseDist("exp:100ms")
	require.NoError(t, err)
	init, err := ParseDist("10s")
	require.NoError(t, err)
	base := Config{Rates: constRates(30, 600), Service: svc, Init: init, Concurrency: 2, CPU: 1, Target: 0.5, Percentile: 95,
		InitialReplicas: 4, Seed: 2, Nodes: 2, NodeCPU: 4}
	for _, tc := range []struct {
		name       string
		background float64
		nodes      int
		nodeCPU    float64
		static     int
		wantReady  int
		slower     bool
	}{
		{name: "room and no other work: no contention", nodes: 2, nodeCPU: 4, static: 4, wantReady: 4},
		{name: "busy neighbours stretch service times", background: 3.5, nodes: 2, nodeCPU: 4, static: 4, wantReady: 4, slower: true},
		{name: "pods beyond the nodes' room stay Pending", nodes: 1, nodeCPU: 2, static: 6, wantReady: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Background, cfg.Nodes, cfg.NodeCPU = tc.background, tc.nodes, tc.nodeCPU
			cfg.InitialReplicas = min(tc.static, 2)
			r := Run(cfg, policy.Static{N: tc.static})
			require.Equal(t, tc.wantReady, r.Ready[len(r.Ready)-1])
			free := base
			free.Nodes = 0
			free.InitialReplicas = cfg.InitialReplicas
			ref := Run(free, policy.Static{N: tc.static})
			if tc.slower {
				require.Greater(t, r.MeanLatency, 1.3*ref.MeanLatency, "contended %.3f s vs free %.3f s", r.MeanLatency, ref.MeanLatency)
			} else if tc.wantReady == tc.static {
				require.Equal(t, ref.Requests, r.Requests, "without contention the node model changes nothing")
				require.InDelta(t, ref.MeanLatency, r.MeanLatency, 1e-12)
			}
		})
	}
}
