package measure

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRefusals: each reason is counted apart, concurrently without loss; a refusal
// is neither an arrival nor a completion, and the /stats document does not change.
func TestRefusals(t *testing.T) {
	_, r := newFake()
	before, err := json.Marshal(r.Snapshot())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i, f := range Refusals {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 * (i + 1) {
					r.Refuse(f)
				}
			}()
		}
	}
	wg.Wait()
	names := map[string]uint64{}
	for i, f := range Refusals {
		require.Equal(t, uint64(400*(i+1)), r.Refused(f), f.String())
		names[f.String()] = r.Refused(f)
	}
	require.Equal(t, map[string]uint64{"connect": 400, "malformed_h2": 800, "request_target": 1200, "ambiguous_framing": 1600}, names)
	s := r.Snapshot()
	require.Zero(t, s.Arrivals)
	require.Zero(t, s.Completions)
	// Only the sequence number and the time move in /stats.
	after, err := json.Marshal(s)
	require.NoError(t, err)
	var b, a map[string]any
	require.NoError(t, json.Unmarshal(before, &b))
	require.NoError(t, json.Unmarshal(after, &a))
	delete(b, "seq")
	delete(a, "seq")
	require.Equal(t, b, a)

	// An unknown reason is not counted, nor does it panic.
	r.Refuse(numRefusals)
	require.Zero(t, r.Refused(numRefusals))
	require.Equal(t, "unknown", numRefusals.String())
}
