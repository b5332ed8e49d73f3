package decide

import (
	"fmt"
	"math"
)

// The service-time estimate (docs/model.md section 1, "E[S] over many
// intervals"). E[S], its SCV and the shape of its tail belong to the
// application: they change slowly, or at a step (a new version, a resize, a
// hot node). One scrape interval measures them over a few hundred requests,
// and the mean of 150 lognormal service times of cv 1.2 moves by 10 % from one
// interval to the next. Where the service time alone puts a large part of the
// budget over the target, the pods the target needs move by several for 1 % of
// E[S] (docs/model.md), so the model sized the noise. The engine therefore
// pools the intervals' moments, weighted by their requests, over a memory of
// serviceMemory requests, and starts again from the newest interval when a
// two-sided CUSUM on the intervals' standardised means finds the level moved,
// or when the pods' CPU request changed (E[S] depends on it).

// serviceRelErr is the relative standard error of E[S] the memory is sized
// for: the memory holds scv/serviceRelErr² requests (10 000 for exponential
// service, 14 400 at cv 1.2). At 1 % the service time's own share over a
// target of four means moves by about 5 % of itself for lognormal cv 1.2
// (the elasticity of the tail there is about 5), a tenth of a point of a 5 %
// budget; a tenth of that error needs a hundred times the requests.
const serviceRelErr = 0.01

// minServiceSCV bounds the SCV the memory is sized from, so that a nearly
// constant service time still pools a hundred requests.
const minServiceSCV = 0.01

// Page's CUSUM on the intervals' means, in standard errors of one interval's
// mean: reference value k = 0.5 (a shift of one standard error is what it
// is tuned to find) and decision interval h = 8. By Siegmund's approximation
// that is about 19 000 intervals between false alarms on each side (26 hours
// of 5 s intervals: the textbook h = 5 gives one every 80 minutes, and every
// false alarm restarts the estimate from a few noisy intervals), and a shift
// of two standard errors is found in about 6 intervals, one of one in about 16.
const cusumK, cusumH = 0.5, 8.0

// cusumClip bounds one interval's standardised mean in the CUSUM (a
// winsorised CUSUM): a heavy-tailed service time puts one request of seconds
// among a few dozen now and then, and that one interval's mean lies tens of
// standard errors out. Clipped at h/2, no single interval starts the
// estimate again, however extreme: three in a row beyond the clip must.
const cusumClip = cusumH / 2

// serviceEstimate pools the service-time moments of the intervals since the
// last restart, the older ones forgotten exponentially by requests.
type serviceEstimate struct {
	// n is the requests (decayed), sum and sumSq their Σ S and Σ S².
	n, sum, sumSq float64
	// up and down are the CUSUM statistics, and upRun and downRun the
	// intervals since each was last zero: where the level moved, by Page's
	// estimate of the change point. An alarm starts the estimate again from
	// them.
	up, down       float64
	upRun, downRun moments
	// cpu is the pods' mean CPU request (millicores) the moments were
	// measured at; 0: unknown.
	cpu float64
}

func (s *serviceEstimate) mean() float64 {
	if s.n <= 0 {
		return 0
	}
	return s.sum / s.n
}

func (s *serviceEstimate) scv() float64 {
	m := s.mean()
	if m <= 0 {
		return 0
	}
	return math.Max(0, s.sumSq/s.n/(m*m)-1)
}

// moments are Σ 1, Σ S and Σ S² of some requests.
type moments struct{ n, sum, sumSq float64 }

func (m *moments) add(n, es, scv float64) {
	m.n += n
	m.sum += n * es
	m.sumSq += n * (1 + scv) * es * es
}

// memory is the requests the estimate is pooled over.
func serviceMemory(scv float64) float64 {
	return math.Max(scv, minServiceSCV) / (serviceRelErr * serviceRelErr)
}

// update folds in one interval of n requests with mean es and SCV scv,
// measured while the pods' mean CPU request was cpu (0: unknown). It returns
// why it started again ("" when it did not).
func (s *serviceEstimate) update(es, scv, n, cpu float64) string {
	if es <= 0 || n <= 0 {
		return ""
	}
	why := ""
	var since moments
	if s.n > 0 {
		m, v := s.mean(), s.scv()
		if cpu > 0 && s.cpu > 0 && math.Abs(cpu-s.cpu) > 0.005*s.cpu {
			why = fmt.Sprintf("the pods' CPU request changed (%.0fm → %.0fm)", s.cpu, cpu)
		} else if se := m * math.Sqrt(math.Max(v, minServiceSCV)*(1/n+1/s.n)); se > 0 {
			z := min(max((es-m)/se, -cusumClip), cusumClip)
			s.up, s.upRun = cusumStep(s.up+z-cusumK, s.upRun, n, es, scv)
			s.down, s.downRun = cusumStep(s.down-z-cusumK, s.downRun, n, es, scv)
			switch {
			case s.up > cusumH:
				why, since = fmt.Sprintf("the service time rose beyond the CUSUM's limit (%.3gs over the last %.0f requests against %.3gs pooled)", s.upRun.sum/s.upRun.n, s.upRun.n, m), s.upRun
			case s.down > cusumH:
				why, since = fmt.Sprintf("the service time fell beyond the CUSUM's limit (%.3gs over the last %.0f requests against %.3gs pooled)", s.downRun.sum/s.downRun.n, s.downRun.n, m), s.downRun
			}
		}
	}
	if why != "" {
		// The requests since the change point, this interval's included.
		*s = serviceEstimate{n: since.n, sum: since.sum, sumSq: since.sumSq, cpu: cpu}
		if since.n == 0 {
			s.add(n, es, scv)
		}
		return why
	}
	s.cpu = cpu
	if s.n > 0 {
		f := math.Exp(-n / serviceMemory(s.scv()))
		s.n, s.sum, s.sumSq = s.n*f, s.sum*f, s.sumSq*f
	}
	s.add(n, es, scv)
	return why
}

func (s *serviceEstimate) add(n, es, scv float64) {
	m := moments{s.n, s.sum, s.sumSq}
	m.add(n, es, scv)
	s.n, s.sum, s.sumSq = m.n, m.sum, m.sumSq
}

// cusumStep returns the CUSUM statistic stat floored at zero and the run of
// intervals since it was last zero, this one (n requests, mean es, SCV scv)
// included while it is above zero.
func cusumStep(stat float64, run moments, n, es, scv float64) (float64, moments) {
	if stat <= 0 {
		return 0, moments{}
	}
	run.add(n, es, scv)
	return stat, run
}

// serviceTime folds this snapshot's service-time measurement into the
// estimate and returns E[S] and its SCV (zeros: never measured), the weight
// of this interval's quantiles in the averaged tail shape (1: start afresh)
// and the requests they were measured over (0: none folded in), and fills the
// explanation's terms.
func (e *Engine) serviceTime(snap Snapshot, lambda float64, fresh bool, x *Explanation) (es, scv, shapeWeight, samples float64) {
	n := snap.ServiceSamples
	if n <= 0 {
		n = lambda * newestInterval(snap).Seconds()
	}
	var cpu float64
	var pods int
	for _, p := range snap.Pods {
		if p.CPURequest > 0 && !p.Terminating {
			cpu += float64(p.CPURequest)
			pods++
		}
	}
	if pods > 0 {
		cpu /= float64(pods)
	}
	x.ServiceTimeInterval = snap.ServiceTime
	shapeWeight = 0
	// The same interval twice is counted once (fresh).
	if snap.ServiceTime > 0 && n > 0 && fresh {
		why := e.service.update(snap.ServiceTime, orOne(snap.ServiceSCV), n, cpu)
		// This interval's share of the pooled requests: the quantiles are
		// averaged as the moments are.
		shapeWeight, samples = math.Min(1, n/e.service.n), n
		if why != "" {
			shapeWeight = 1
		}
		if why != "" {
			x.ServiceNote = "E[S] estimate started again: " + why
		}
	}
	es, scv = e.service.mean(), e.service.scv()
	x.ServiceSamples = e.service.n
	if es > 0 && x.ServiceNote == "" {
		x.ServiceNote = fmt.Sprintf("E[S] pooled over the last %.0f requests (memory %.0f: a %.0f%% standard error)",
			e.service.n, serviceMemory(scv), 100*serviceRelErr*math.Sqrt(math.Max(serviceMemory(scv)/e.service.n, 1)))
	}
	return es, scv, shapeWeight, samples
}
