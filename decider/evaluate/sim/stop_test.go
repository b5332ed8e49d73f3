package sim

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/evaluate/policy"
)

// TestCompareStopsWhenTheContextEnds: a comparison whose context ends (a signal to
// the command) stops the run under way at its next simulated second, runs no other
// policy or yardstick, and returns an error that wraps the context's cause and says
// how far it got; one whose context has already ended runs nothing.
func TestCompareStopsWhenTheContextEnds(t *testing.T) {
	cfg := Config{Rates: constRates(20, 3600), Service: mustDist(t, "exp:50ms"), Init: mustDist(t, "20s"), Concurrency: 1, CPU: 0.5,
		Target: 0.2, Percentile: 95, Seed: 1}
	p := policy.Params{Target: 0.2, Percentile: 95, Concurrency: 1, CPU: 0.5, MinReplicas: 1, MaxReplicas: 100}
	cause := errors.New("terminated signal received")

	t.Run("during a run", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		run := cfg
		run.Context = ctx
		var mu sync.Mutex
		seen := map[string][]int{} // policy → simulated seconds reported
		stoppedAt := -1
		_, err := Compare(run, []string{"static:2", "hpa", "oracle"}, p, func(name string, second, _ int) {
			mu.Lock()
			defer mu.Unlock()
			seen[name] = append(seen[name], second)
			if name == "hpa" && second >= 600 && stoppedAt < 0 {
				stoppedAt = second
				cancel(cause)
			}
		})
		require.ErrorIs(t, err, cause)
		require.ErrorContains(t, err, "simulation stopped during hpa (1 of 3 policies and yardsticks done)")
		require.Equal(t, 3600, seen["static:2"][len(seen["static:2"])-1], "the policy before ran to its end")
		require.Equal(t, stoppedAt, seen["hpa"][len(seen["hpa"])-1], "hpa stopped within the minute it was stopped in, and reported no end")
		require.NotContains(t, seen, "oracle search", "no yardstick ran after the stop")
	})

	t.Run("before it starts", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		run := cfg
		run.Context = ctx
		var reported []string
		_, err := Compare(run, []string{"hpa", "oracle"}, p, func(name string, second, _ int) {
			if second > 0 {
				reported = append(reported, name)
			}
		})
		require.ErrorIs(t, err, cause)
		require.ErrorContains(t, err, "simulation stopped during hpa (0 of 2 policies and yardsticks done)")
		require.Empty(t, reported, "no simulated second after the first")
	})

	t.Run("without a context", func(t *testing.T) {
		c, err := Compare(cfg, []string{"static:2"}, p, nil)
		require.NoError(t, err)
		require.Positive(t, c.Summaries[0].Requests)
	})
}
