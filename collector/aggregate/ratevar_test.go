package aggregate

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/proxy/stats"
)

// sec0 is a whole Unix second; the tests' seconds are counted from it.
var sec0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()

const miss = ratevar.Missing

// between is Unix time sec0+a .. sec0+b (in seconds, fractions allowed).
func between(a, b float64) (time.Time, time.Time) {
	at := func(x float64) time.Time { return time.Unix(sec0, 0).Add(time.Duration(x * float64(time.Second))) }
	return at(a), at(b)
}

// podWith is a pod's interval from sec0+a to sec0+b whose proxy served the
// series counts, oldest first, of the seconds up to sec0+end (nil counts: no series).
func podWith(name string, a, b float64, end int64, counts ...int64) scrape.Interval {
	iv := scrape.Interval{Target: scrape.Target{Namespace: "ns", Workload: "w", Pod: name}}
	iv.Start, iv.End = between(a, b)
	iv.Arrivals = 100
	if counts != nil {
		iv.ArrivalsPerSecond = &stats.PerSecond{EndUnix: sec0 + end, Counts: counts}
	}
	return iv
}

func TestWorkloadArrivalsPerSecond(t *testing.T) {
	front := podWith("front-0", 0.1, 6.1, 5, 50, 50, 50, 50, 50, 50, 50)
	front.Front = true
	tests := []struct {
		name  string
		ivs   []scrape.Interval
		after int64 // relative to sec0; 0: none
		// first and want are the summed series the cycle counts (want nil: none).
		first int64
		want  []int64
	}{
		{
			name: "one pod, only the seconds that end inside its interval",
			// Interval 0.4..6.4: the seconds 0..5 end in it; the series also holds -2 and -1.
			ivs:   []scrape.Interval{podWith("a", 0.4, 6.4, 5, 8, 8, 9, 4, 6, 5, 7, 3)},
			first: 0, want: []int64{9, 4, 6, 5, 7, 3},
		},
		{
			name: "a second that ends with the interval is inside it",
			ivs:  []scrape.Interval{podWith("a", 1, 6, 5, 4, 6, 5, 7, 3)},
			// 1..5: the interval starts on a boundary and ends on one.
			first: 1, want: []int64{4, 6, 5, 7, 3},
		},
		{
			name: "pods' rings shifted: only the seconds both hold",
			ivs: []scrape.Interval{
				podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3),
				// b's last wake had not closed 5 yet; its ring starts at 2.
				podWith("b", 0.5, 6.01, 4, 1, 2, 3),
			},
			first: 2, want: []int64{6 + 1, 5 + 2, 7 + 3},
		},
		{
			name: "a second missing at one pod is missing in the sum",
			ivs: []scrape.Interval{
				podWith("a", 0.4, 6.4, 5, 4, 6, miss, 7, 3),
				podWith("b", 0.5, 6.5, 5, 1, 1, 1, 1, 1),
			},
			first: 1, want: []int64{5, 7, miss, 8, 4},
		},
		{
			name: "a pod that joined mid-interval narrows the cycle to its seconds",
			ivs: []scrape.Interval{
				podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3),
				// Its process started at 2.6: 2 is Missing, and its interval starts then.
				podWith("c", 2.6, 6.5, 5, miss, miss, 2, 2, 2),
			},
			first: 2, want: []int64{miss, 5 + 2, 7 + 2, 3 + 2},
		},
		{
			name:  "a front replica is no pod",
			ivs:   []scrape.Interval{podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3), front},
			first: 1, want: []int64{4, 6, 5, 7, 3},
		},
		{
			name: "the intersection of the pods' intervals",
			ivs: []scrape.Interval{
				podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3),
				podWith("b", 1.7, 5.2, 5, 1, 1, 1, 1, 1),
			},
			// The seconds 1..4 end inside b's interval.
			first: 1, want: []int64{5, 7, 6, 8},
		},
		{
			name:  "seconds already counted by the previous cycle are not counted again",
			ivs:   []scrape.Interval{podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3)},
			after: 3,
			first: 4, want: []int64{7, 3},
		},
		{
			name:  "a last second far ahead is from a clock since stepped back",
			ivs:   []scrape.Interval{podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3)},
			after: 3600,
			first: 1, want: []int64{4, 6, 5, 7, 3},
		},
		{
			name:  "a last second ahead by less than a minute holds",
			ivs:   []scrape.Interval{podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3)},
			after: 30,
		},
		{
			name: "a pod without a series: none",
			ivs: []scrape.Interval{
				podWith("a", 0.4, 6.4, 5, 4, 6, 5, 7, 3),
				podWith("old", 0.5, 6.5, 0),
			},
		},
		{
			name: "a series that ends before the interval: none",
			ivs:  []scrape.Interval{podWith("a", 10.4, 16.4, 5, 4, 6, 5, 7, 3)},
		},
		{
			name: "only a front: none",
			ivs:  []scrape.Interval{front},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := int64(math.MinInt64)
			if tt.after != 0 {
				after = sec0 + tt.after
			}
			first, got := arrivalSeries(tt.ivs, after)
			if tt.want == nil {
				require.Empty(t, got)
			} else {
				require.Equal(t, tt.want, got)
				require.Equal(t, sec0+tt.first, first)
			}

			m, err := WorkloadAfter(tt.ivs, RateCarry{Second: after, Count: miss})
			require.NoError(t, err)
			require.NoError(t, m.Check())
			wantSums, err := ratevar.Of(tt.want)
			require.NoError(t, err)
			require.Equal(t, wantSums, m.ArrivalRateSums)
			if tt.want == nil {
				require.False(t, m.ArrivalRateCV2Valid())
				require.Zero(t, m.ArrivalRateCV2)
				require.Equal(t, after, m.ArrivalRateCarry.Second, "the carry stays")
				return
			}
			require.Equal(t, RateCarry{Second: sec0 + tt.first + int64(len(tt.want)) - 1, Count: tt.want[len(tt.want)-1], Pods: podKeys(tt.ivs)},
				m.ArrivalRateCarry)
			require.True(t, m.ArrivalRateCV2Valid())
			cv2, err := ratevar.CV2(wantSums)
			require.NoError(t, err)
			require.Equal(t, cv2, m.ArrivalRateCV2)
		})
	}
}

// TestArrivalsPerSecondNoSecondCountedTwice runs two consecutive cycles and
// checks that their series do not overlap: by the intervals alone when the
// cycles share a pod, by the previous cycle's last second when they do not.
func TestArrivalsPerSecondNoSecondCountedTwice(t *testing.T) {
	ring := func() []int64 { // a proxy's last 32 seconds, each counting 2
		out := make([]int64, 32)
		for i := range out {
			out[i] = 2
		}
		return out
	}
	t.Run("consecutive cycles of the same pods", func(t *testing.T) {
		cycle1 := []scrape.Interval{podWith("a", 0.4, 6.4, 5, ring()...), podWith("b", 0.9, 6.9, 5, ring()...)}
		cycle2 := []scrape.Interval{podWith("a", 6.4, 12.4, 11, ring()...), podWith("b", 6.9, 12.9, 11, ring()...)}
		m1, err := Workload(cycle1)
		require.NoError(t, err)
		// Without the previous cycle's last second: the intervals alone.
		first2, series2 := arrivalSeries(cycle2, math.MinInt64)
		require.Equal(t, sec0+5, m1.ArrivalRateCarry.Second)
		require.Equal(t, m1.ArrivalRateCarry.Second+1, first2, "none lost: 6, in progress at the scrapes, ends in the second cycle")
		require.Len(t, series2, 6)
	})
	t.Run("cycles that share no pod", func(t *testing.T) {
		// Every pod replaced; the new pod's clock is 1.5 s behind the old one's,
		// so its interval covers seconds the old pod's did.
		cycle1 := []scrape.Interval{podWith("a", 0.4, 6.4, 5, ring()...)}
		cycle2 := []scrape.Interval{podWith("d", 3.2, 9.2, 8, ring()...)}
		m1, err := Workload(cycle1)
		require.NoError(t, err)
		first2, _ := arrivalSeries(cycle2, math.MinInt64)
		require.LessOrEqual(t, first2, m1.ArrivalRateCarry.Second, "the intervals alone would count 4 and 5 twice")
		m2, err := WorkloadAfter(cycle2, m1.ArrivalRateCarry)
		require.NoError(t, err)
		first2, series2 := arrivalSeries(cycle2, m1.ArrivalRateCarry.Second)
		require.Equal(t, m1.ArrivalRateCarry.Second+1, first2)
		require.Equal(t, []int64{2, 2, 2}, series2, "6, 7 and 8")
		require.Equal(t, uint64(2), m2.ArrivalRateSums.Pairs, "5 and 6 are no pair: other pods summed them")
	})
}

func TestArrivalRateCV2MayBeNegativeButNotNaN(t *testing.T) {
	// A constant 5 per second is less variable than Poisson: cv² = -1/5.
	m, err := Workload([]scrape.Interval{podWith("a", 0.4, 6.4, 5, 5, 5, 5, 5, 5)})
	require.NoError(t, err)
	require.True(t, m.ArrivalRateCV2Valid())
	require.InDelta(t, -0.2, m.ArrivalRateCV2, 1e-12)
	require.NoError(t, m.Check())
	// Seconds without any arrival say nothing: no estimate.
	m, err = Workload([]scrape.Interval{podWith("a", 0.4, 6.4, 5, 0, 0, 0, 0, 0)})
	require.NoError(t, err)
	require.False(t, m.ArrivalRateCV2Valid())
	require.Equal(t, uint64(4), m.ArrivalRateSums.Pairs)
	m.ArrivalRateCV2 = math.NaN()
	require.ErrorContains(t, m.Check(), "arrival_rate_cv2 is NaN")
}

// TestArrivalsPerSecondJoinsThePairBetweenCycles: the pair of the last second
// of a cycle and the first of the next counts once, in the second cycle, when
// both are sums over the same pods and known.
func TestArrivalsPerSecondJoinsThePairBetweenCycles(t *testing.T) {
	cycle1 := []scrape.Interval{podWith("a", 0.4, 3.4, 2, 4, 6, 5), podWith("b", 0.5, 3.5, 2, 1, 1, 1)}
	cycle2 := []scrape.Interval{podWith("a", 3.4, 6.4, 5, 4, 6, 5, 9, 8, 3), podWith("b", 3.5, 6.5, 5, 1, 1, 1, 2, 2, 2)}
	m1, err := Workload(cycle1)
	require.NoError(t, err)
	require.Equal(t, RateCarry{Second: sec0 + 2, Count: 6, Pods: "ns/a\x00ns/b"}, m1.ArrivalRateCarry)
	whole, err := ratevar.Of([]int64{5, 7, 6, 11, 10, 5})
	require.NoError(t, err)
	tests := []struct {
		name string
		prev RateCarry
		ivs  []scrape.Interval
		want []int64
	}{
		{"same pods: the pair between the cycles counts", m1.ArrivalRateCarry, cycle2, []int64{6, 11, 10, 5}},
		{"the last second unknown", RateCarry{Second: sec0 + 2, Count: miss, Pods: m1.ArrivalRateCarry.Pods}, cycle2, []int64{11, 10, 5}},
		{"other pods", RateCarry{Second: sec0 + 2, Count: 6, Pods: "ns/a"}, cycle2, []int64{11, 10, 5}},
		{"not the second before", RateCarry{Second: sec0 + 1, Count: 6, Pods: m1.ArrivalRateCarry.Pods}, cycle2, []int64{11, 10, 5}},
		{"a first cycle", NoCarry, cycle2, []int64{11, 10, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m2, err := WorkloadAfter(tt.ivs, tt.prev)
			require.NoError(t, err)
			want, err := ratevar.Of(tt.want)
			require.NoError(t, err)
			require.Equal(t, want, m2.ArrivalRateSums)
			require.Equal(t, int64(5), m2.ArrivalRateCarry.Count)
		})
	}
	// Joined, the two cycles count what one series over both would.
	m2, err := WorkloadAfter(cycle2, m1.ArrivalRateCarry)
	require.NoError(t, err)
	require.Equal(t, whole, m1.ArrivalRateSums.Add(m2.ArrivalRateSums))
}
