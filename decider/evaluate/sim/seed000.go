package sim

import "math"

// Seed000Stat is seed 000's comparison of its predictive autoscaler with the
// reactive one (its section 5.2.3 and Tables 5.1 and 5.2). Per minute t, ERU
// e_t is the share of requested CPU left idle (IdleCPU, %) and QoS q_t the
// mean response time; both are turned into z-scores over the minutes of the
// two runs together, s_t = −z(e_t) − z(q_t) (higher is better), and the
// statistic is the per-minute difference d_t = s_t(predictive) −
// s_t(reactive): its mean, standard deviation, z = mean / standard deviation
// (the seed's "z-score": its Table 5.1 gives mean 0.185, std_dev 0.803,
// z-score 0.230, so the minus signs its text lost are back: −0.185 / 0.803 =
// −0.230, and its p-value 0.591 is P(Z > −0.230)) and the one-sided p-value
// P(Z > z) for the alternative that predictive is better. Standard deviations
// are population ones (the seed does not say). Minutes in which either run
// finished no request are left out.
type Seed000Stat struct {
	Predictive string  `json:"predictive"`
	Reactive   string  `json:"reactive"`
	Minutes    int     `json:"minutes"`
	Mean       float64 `json:"mean"`
	StdDev     float64 `json:"std_dev"`
	Z          float64 `json:"z"`
	P          float64 `json:"p_value"`
}

// Seed000Compare computes seed 000's statistic of run pred against run react.
func Seed000Compare(pred, react *Result) Seed000Stat {
	st := Seed000Stat{Predictive: pred.Policy, Reactive: react.Policy}
	var minutes []int
	for m := 0; m < min(len(pred.MinuteMeanLatency), len(react.MinuteMeanLatency)); m++ {
		if pred.MinuteMeanLatency[m] > 0 && react.MinuteMeanLatency[m] > 0 {
			minutes = append(minutes, m)
		}
	}
	st.Minutes = len(minutes)
	if len(minutes) == 0 {
		return st
	}
	var eru, qos []float64
	for _, r := range []*Result{pred, react} {
		for _, m := range minutes {
			eru = append(eru, idleCPU(r, m))
			qos = append(qos, r.MinuteMeanLatency[m])
		}
	}
	ze, zq := zscores(eru), zscores(qos)
	n := len(minutes)
	d := make([]float64, n)
	for i := range d {
		d[i] = (-ze[i] - zq[i]) - (-ze[n+i] - zq[n+i])
	}
	st.Mean, st.StdDev = meanStd(d)
	if st.StdDev > 0 {
		st.Z = st.Mean / st.StdDev
	}
	st.P = 0.5 * math.Erfc(st.Z/math.Sqrt2)
	return st
}

// idleCPU is the share of CPU requested in minute m that went unused, in %.
func idleCPU(r *Result, m int) float64 {
	var used, req float64
	for s := 60 * m; s < min(60*(m+1), len(r.CPUUsed)); s++ {
		used += r.CPUUsed[s]
		req += r.CPURequestedPerSecond[s]
	}
	if req == 0 {
		return 0
	}
	return 100 * (1 - used/req)
}

func meanStd(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)))
}

func zscores(x []float64) []float64 {
	m, sd := meanStd(x)
	out := make([]float64, len(x))
	for i, v := range x {
		if sd > 0 {
			out[i] = (v - m) / sd
		}
	}
	return out
}
