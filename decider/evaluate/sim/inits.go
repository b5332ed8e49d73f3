package sim

import "math/rand/v2"

// InitTimes is the sequence of init times of one run: pod start number j
// (counting from 0, in the order pods get a node and start their containers;
// the initial replicas are Ready at once and do not count) takes At(j)
// seconds to become Ready. The values come from the seed's own stream, drawn
// in start order whatever the policy does, so the oracle, which is given the
// same sequence, knows the init time of every pod it will start. Not safe
// for concurrent use; each run and each oracle has its own.
type InitTimes struct {
	dist Dist
	rng  *rand.Rand
	v    []float64
}

// NewInitTimes returns the init-time sequence of a run with distribution d and seed.
func NewInitTimes(d Dist, seed uint64) *InitTimes {
	return &InitTimes{dist: d, rng: newRand(seed, 4)}
}

// At is the init time of pod start number j, in seconds.
func (s *InitTimes) At(j int) float64 {
	for len(s.v) <= j {
		s.v = append(s.v, s.dist.Sample(s.rng))
	}
	return s.v[j]
}
