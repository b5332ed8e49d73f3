// Package influx is QAS's InfluxDB schema and its writer. The schema is declared here
// once; the collector and decider write exactly these measurements, docs/schema.md is
// checked against it, and dashboards are checked against it.
package influx

// Field is one field of a measurement.
type Field struct {
	Name string
	Unit string
	Help string
}

// Measurement is one measurement: its tags (kept few, for cardinality: never per
// request, never per client) and its fields.
type Measurement struct {
	Name   string
	Help   string
	Tags   []string
	Fields []Field
}

// Measurement names.
const (
	Pod      = "qas_pod"
	Workload = "qas_workload"
	Node     = "qas_node"
	Decision = "qas_decision"
)

// Schema is every measurement QAS writes.
var Schema = []Measurement{
	{
		Name: Pod, Help: "One pod's proxy measurements and CPU over one scrape interval, timed by the collector's clock when it scraped the proxy.",
		Tags: []string{"namespace", "workload", "pod", "node"},
		Fields: []Field{
			{"arrival_rate", "1/s", "requests arriving per second (λ of this pod); on the pooled data plane, those that reached it through the Service (a request pulled from the front counts at the pod it arrived at)"},
			{"service_mean_seconds", "s", "mean service time E[S]: slot to end of response, over the requests served here (not the 503s of a full queue, nor overflows relayed from the front)"},
			{"service_scv", "1", "squared coefficient of variation of service time"},
			{"queue_wait_mean_seconds", "s", "mean wait for a concurrency slot in the proxy"},
			{"in_flight_mean", "1", "time-average requests in service (Little's law: ≈ λ·E[S])"},
			{"in_flight", "1", "requests in service at the end of the interval (gauge): with waiting, the pod's queue now"},
			{"waiting", "1", "requests waiting for a concurrency slot in the proxy at the end of the interval (gauge)"},
			{"busy_ratio", "1", "share of the interval with at least one request in flight"},
			{"error_rate", "1/s", "5xx responses per second"},
			{"latency_p50_seconds", "s", "median latency at the proxy (queue wait + service)"},
			{"latency_p95_seconds", "s", "95th percentile latency at the proxy"},
			{"latency_p99_seconds", "s", "99th percentile latency at the proxy"},
			{"cpu_usage_cores", "cores", "absolute CPU usage of the pod (metrics.k8s.io)"},
			{"cpu_request_cores", "cores", "sum of the pod's containers' CPU requests"},
			{"cpu_limit_cores", "cores", "sum of CPU limits; 0 when any container has none"},
			{"proxy_time_seconds", "s", "end of the interval on the proxy's clock (Unix time); the point's own time is the collector's scrape time"},
			{"clock_offset_seconds", "s", "the proxy's clock minus the collector's at the scrape (positive: the proxy is ahead)"},
		},
	},
	{
		Name: Workload, Help: "A workload's aggregate over its pods for one interval: what the decider models. Timed by the collector's clock (its newest pod's scrape).",
		Tags: []string{"namespace", "workload"},
		Fields: []Field{
			{"arrival_rate", "1/s", "λ: requests per second over all pods, each counted once (a request pulled from the pooled front is counted where it arrived, not again where it was served)"},
			{"service_mean_seconds", "s", "E[S] over all pods' served requests (each counted once, by the pod that served it)"},
			{"service_scv", "1", "squared coefficient of variation of service time"},
			{"service_samples", "1", "served requests (those that held a slot and completed) that service_mean_seconds, service_scv and the service quantiles are over: the decider pools the intervals' service times weighted by it (absent from a collector that predates it: the decider then takes arrival_rate × the interval); a float, as every field the decider reads"},
			{"in_flight_mean", "1", "time-average requests in service over all pods"},
			{"error_rate", "1/s", "5xx responses per second"},
			{"latency_p50_seconds", "s", "median latency from the merged histograms"},
			{"latency_p95_seconds", "s", "95th percentile latency from the merged histograms"},
			{"latency_p99_seconds", "s", "99th percentile latency from the merged histograms"},
			{LatencyBucketPattern, "1", "requests of the interval whose latency was at most the bound in the name (seconds) and above the next lower bucket field's, from the merged histograms " +
				"(a field per bucket of the proxies' histogram holding a whole count as a float, the bound in its shortest decimal form: latency_bucket_le_0.0001 … latency_bucket_le_60, " +
				"and latency_bucket_le_inf above the last, always written). An empty bucket whose next one is empty too is left out: the next field's interval then spans it, " +
				"and the count at most any bound is still exact. All absent when no request completed. With them the decider reads the share of requests over its target " +
				"exactly when the target is a bound of the proxies' histogram, where interpolating between p50, p95 and p99 overstates a heavy tail"},
			{ServiceBucketPattern, "1", "requests of the interval whose service time (slot to end of response, no queue wait) was at most the bound in the name (seconds) and above the next lower bucket field's, " +
				"from the merged service histograms, which the proxies count in their latency histogram's bounds (service_bucket_le_0.0001 … service_bucket_le_60, and service_bucket_le_inf above the last, always written). " +
				"Served requests only (those that held a slot and completed; pods left out of the latency buckets for other bounds are left out here too). " +
				"Empty buckets are left out as the latency buckets' are, and all are absent when no served request completed or no proxy measures service times. " +
				"With them the decider adds the intervals' service histograms and reads the service tail's shape at any percentile from the sum; " +
				"the service quantiles below are written all the same, for deciders that predate the buckets"},
			{"service_p50_seconds", "s", "median service time (slot to end of response, no queue wait) from the merged service histograms; absent when no served request completed"},
			{"service_p75_seconds", "s", "75th percentile service time"},
			{"service_p90_seconds", "s", "90th percentile service time"},
			{"service_p95_seconds", "s", "95th percentile service time"},
			{"service_p97_5_seconds", "s", "97.5th percentile service time"},
			{"service_p99_seconds", "s", "99th percentile service time"},
			{"service_p99_5_seconds", "s", "99.5th percentile service time"},
			{"service_p99_9_seconds", "s", "99.9th percentile service time: with the others, the shape the decider models the latency tail from (the survival log-linear inside each histogram bucket)"},
			{"arrival_rate_cv2", "1", "relative variance of the workload's arrival rate from one second to the next beyond Poisson noise (0: Poisson; from successive differences of whole seconds' counts summed over its pods, so a trend does not count); unbiased, so it can be slightly negative; written only when arrival_rate_pairs > 0 and a pair had an arrival"},
			{"arrival_rate_pairs", "1", "pairs of successive whole seconds, counted at every pod, that arrival_rate_cv2 is estimated from: its weight when several points are averaged (the decider reads the newest point's and averages the intervals itself, each once, weighted by their pairs; until 2026-11-29 it read Σ(cv2·pairs)/Σpairs over its whole window); a float, as every field the decider reads"},
			{"pods", "1", "pods scraped successfully this interval"},
			{"clock_offset_seconds", "s", "the largest (in magnitude) offset of a pod's proxy clock from the collector's"},
			// The pooled data plane (routing: pooled, issue #20): the sidecars' overflow
			// to the workload's front, summed over pods, and the front's queue, summed
			// over its replicas. Absent (0) for a workload that does not pool.
			{"overflow_rate", "1/s", "requests per second the sidecars sent to the front and it accepted"},
			{"overflow_share", "1", "(overflow_rate − expired_requeued_rate) / arrival_rate: the share of arrivals that found their pod full and were answered through the front"},
			{"overflow_refused_rate", "1/s", "overflow attempts per second the front refused (queue full, not authenticated): served locally"},
			{"overflow_failed_rate", "1/s", "overflow attempts per second with no decision in time or a connection error: served locally"},
			{"pulled_rate", "1/s", "requests per second the sidecars pulled from the front and served"},
			{"front_failure_rate", "1/s", "times per second a sidecar marked a front replica suspect"},
			{"drain_pushed_rate", "1/s", "requests per second that waited in a draining pod's local queue and a front took (a part of overflow_rate): served by the pods that stay"},
			{"drain_kept_rate", "1/s", "requests per second that waited in a draining pod's local queue, were offered to a front and served by the draining pod after all (refused, no decision in time, no front, or given back unseen)"},
			{"expired_requeued_rate", "1/s", "accepted overflows per second that the front gave back unseen (its max wait, or it shut down) and the sender served itself"},
			{"expired_relayed_rate", "1/s", "accepted overflows per second that the front gave back unseen and the sender answered with the front's 503 (the body was not kept)"},
			{"front_queue_length", "1", "requests waiting in the front for a pull at the end of the interval (gauge, summed over replicas): the pooled backlog"},
			{"front_waiting_pulls", "1", "pulls waiting at the front for a request (gauge, summed over replicas): free slots"},
			{"front_accepted_rate", "1/s", "overflow requests per second the front took into its queue"},
			{"front_refused_full_rate", "1/s", "overflow requests per second the front refused with its queue full"},
			{"front_unauthenticated_rate", "1/s", "requests per second the front refused as not authenticated"},
			{"front_expired_rate", "1/s", "queued requests per second that waited past the front's maximum wait (503)"},
			{"overflow_decision_p50_seconds", "s", "median time from sending an overflow to the front's accept or refuse (the extra hop's cost), merged over pods"},
			{"overflow_decision_p95_seconds", "s", "95th percentile of the overflow decision time"},
			{"front_queue_wait_p50_seconds", "s", "median wait of the interval's requests in the front's queue, merged over replicas"},
			{"front_queue_wait_p95_seconds", "s", "95th percentile of the wait in the front's queue"},
			{"fronts", "1", "front replicas scraped successfully this interval"},
		},
	},
	{
		Name: Node, Help: "A node's absolute CPU: usage against allocatable, not the pods' share of their requests.",
		Tags: []string{"node"},
		Fields: []Field{
			{"cpu_usage_cores", "cores", "CPU used on the node (metrics.k8s.io NodeMetrics)"},
			{"cpu_allocatable_cores", "cores", "allocatable CPU of the node"},
			{"cpu_utilization", "1", "usage / allocatable, the φ of migration"},
		},
	},
	{
		Name: Decision, Help: "One decider decision with the inputs it used (for annotations and explanations). " +
			"The workload tag is the scaled workload (the QueueAutoscaler's scaleTargetRef.name), as in qas_workload and qas_pod.",
		Tags: []string{"namespace", "queueautoscaler", "workload", "action"},
		Fields: []Field{
			{"current_replicas", "1", "replicas before the decision"},
			{"desired_replicas", "1", "replicas decided"},
			{"desired_cpu_millicores", "m", "CPU per pod decided (0 = unchanged)"},
			{"arrival_rate", "1/s", "λ now"},
			{"forecast_arrival_rate", "1/s", "λ forecast at now + lead"},
			{"forecast_arrival_rate_low", "1/s", "the forecast's lower confidence bound at the SLO's confidence, given the counts' dispersion: what the scale-up sizes for"},
			{"forecast_window_seconds", "s", "how far back the forecast's line runs: the longest window, in whole leads, whose rates a line fits within their counts' noise (0: no forecast)"},
			{"service_mean_seconds", "s", "E[S] used: the intervals' service times pooled over service_samples requests (docs/model.md section 1)"},
			{"service_mean_interval_seconds", "s", "E[S] as the newest interval measured it (0: none served), which the pooled estimate folded in"},
			{"service_samples", "1", "requests the pooled E[S] is over (decayed; a memory of about SCV × 10 000), started again after a step in the service time or a CPU change"},
			{"modelled_latency_seconds", "s", "modelled latency at the target percentile for the current allocation"},
			{"measured_latency_seconds", "s", "latency measured by the proxies"},
			{"target_seconds", "s", "the latency objective"},
			{"lead_seconds", "s", "predictive lead (p90 pod start time)"},
			{"normalized", "1", "G = L / T"},
			{"short_arrival_rate", "1/s", "λ over the short window (the newest scrape): the fast path's rate"},
			{"short_arrival_rate_low", "1/s", "the short window's rate at its lower confidence bound: what the fast path sizes for"},
			{"backlog", "1", "requests queued in the pods beyond what they clear within the target, with the pooled front's queue beyond the pods' room and the requests the fronts gave back unseen over the last interval"},
			{"backlog_expired", "1", "the part of the backlog that the pooled fronts' expiries add: expired_rate × the last interval"},
			{"expired_rate", "1/s", "requests per second the pooled fronts gave back unseen past their maximum wait or at shutdown, as the decider read them (the workload's expired_requeued_rate + expired_relayed_rate, not its front_expired_rate; 0 unless pooled)"},
			{"front_refused_full_rate", "1/s", "overflows per second the pooled fronts refused with their queue full, as the decider read them (the workload's front_refused_full_rate; shown, not modelled)"},
			{"expired_late_share", "1", "expired_rate over λ now: the floor under measured_late_share"},
			{"drain_replicas", "1", "pods the fluid model says drain the backlog within one lead (0: none)"},
			{"latency_bias", "1", "the closed loop's correction of the waiting time's variability (1: none)"},
			{"measured_late_share", "1", "share of the last interval's requests over the target, from the proxies' latency histogram (from the measured quantiles without one), at least expired_late_share"},
			{"modelled_late_share", "1", "the model's P(latency > target) for the same allocation"},
			{"steady_late_share", "1", "modelled_late_share with every second at its steady state: above it by what the seconds near the pods' capacity, priced at their one-second transient, took off"},
			{"jump_ratio", "1", "p-quantile of λ's jumps over one lead in the history: the scale-down's margin"},
			{"count_dispersion", "1", "measured variance/mean of short-window arrival counts (1: Poisson)"},
			{"transient_late_share", "1", "share of recent requests that backlogs put over the target (measured)"},
			{"recent_late_share", "1", "share of recent requests over the target (measured; the closed loop's memory, about 1000/(1 − p) requests)"},
			{"recent_late_share_error", "1", "the standard error of recent_late_share, the cycles as clusters (late requests come in clumps): the budget is spent only where the share is under it by more than this at the SLO's confidence"},
			{"spent_late_share", "1", "what the steady state spends of the budget the recent requests left unused beyond the tolerance θ (0: none)"},
			{"long_late_share", "1", "share of the requests of the long memory over the target (measured; ten times the closed loop's memory, about 10 000/(1 − p) requests)"},
			{"long_late_share_error", "1", "the standard error of long_late_share, the cycles as clusters"},
			{"tightened_budget", "1", "the late share the jump floor and the scale-down's margin aim at while long_late_share is over the budget less twice its error at the SLO's confidence: the budget less the excess, by at most a fifth (0: the budget itself)"},
			{"effective_percentile", "%", "the percentile the model sized for: the spec's, stricter by up to a fifth of its budget while recent transients' late requests are paid back, looser by up to a fifth by spent_late_share"},
			{"recurrence_period_seconds", "s", "period the long history's onsets recur at (written only when one is found)"},
			{"recurrence_occurrences", "1", "onsets on that period in the long history"},
			{"recurrence_confidence", "1", "share of the onsets the period expected that came"},
			{"recurrence_chance", "1", "probability that random onsets as dense would give a chain as good: the evidence (at most 0.01)"},
			{"recurrence_next_seconds", "s", "time from the decision to the next forecast onset (negative: past, not yet seen)"},
			{"recurrence_forecast_rate", "1/s", "λ forecast for the next burst: the lowest level of the recent occurrences"},
			{"recurrence_active", "bool", "true while the forecast sizes the workload (from one lead before the onset)"},
			{"recurrence_contradicted", "bool", "true when the last forecast burst did not come: reactive until the onsets recur"},
			{"jump_replicas", "1", "the jump floor: pods whose late share over the history's jumps over one lead is within jump_budget (0: none)"},
			{"jump_late_share", "1", "the jump floor's modelled late share over the history's jumps at jump_replicas pods (0: no floor)"},
			{"jump_budget", "1", "the late share the jump floor holds the jumps to: 1 − p, or while the steady state spends the unused budget, the budget as spent (1 − effective_percentile / 100)"},
			{"jump_band", "1", "how far over jump_budget the history's jumps may put the current pods' late share before the floor orders more: what the recent requests left of the budget unused, less the share's error at the SLO's confidence, at most θ × the budget (0: none; the floor orders at jump_budget)"},
			{"jump_current_late_share", "1", "the current pods' modelled late share over the history's jumps, weighed against jump_budget + jump_band, when the floor asked for more pods and a band applied (0: not weighed)"},
			{"down_late_share", "1", "the scale-down's margin: the modelled late share over the history's jumps at the pods it keeps, held to 1 − p (0: no scale-down weighed this cycle)"},
			{"recent_jumps", "1", "the jumps over one lead in the last hour, which the scale-down's margin also prices on their own when the history spans more than an hour (0: it did not)"},
			{"recent_margin_replicas", "1", "the pods the last hour's jumps alone asked the margin to keep, when more than the whole history's jumps did: the margin kept them (0: not more)"},
			{"depth", "1", "λ's mean over the last lead ÷ its level, its mean over the five leads before, when the scale-down's margin weighed it (0: not weighed)"},
			{"depth_jumps", "1", "the history's jumps from the depths nearest the present's (the nearer half), when they alone asked the margin to keep more pods than the other histories did (0: not more)"},
			{"depth_margin_replicas", "1", "the pods those jumps from a like depth asked the margin to keep, when more than the whole history and its last hour did: the margin kept them (0: not more)"},
			{"jump_ratio_max", "1", "the largest of λ's jumps over one lead in the history (0: no jump ratio yet)"},
			{"jump_unseen_weight", "1", "the share of the leads the floor and the scale-down give one more lead at the largest jump: 1/(n + 1) for a history of n leads, the rule of succession (0: not used)"},
			{"unseen_rise_ratio", "1", "where the scale-down put that extra lead instead, a rate the history ran at and has not shown a rise to, ÷ λ's mean over the last lead: its highest mean over one lead while none of its jumps has risen, and the rate it started at (its first lead's mean) while it spans fewer leads than a p-quantile needs (0: at the largest jump)"},
			{"declared_rise", "1", "the spec's declared rise (spec.burst.rise) the floor and the scale-down priced beside the history's jumps (0: none declared)"},
			{"declared_rise_weight", "1", "the share of the leads the declared rise was given: what lead ÷ spec.burst.every asks beyond the history's own leads at that ratio or more (0: the history shows it that often, or none declared)"},
			{"jump_base", "1/s", "the λ the jump floor multiplies by each jump: λ's mean over the last lead at its lower confidence bound, given the counts' dispersion (the scale-down's margin reads the mean itself)"},
			{"jumps_rescaled", "1", "how many of those jumps were seen from a base below λ's mean over the last lead, and count at that base as the same rise in requests per second rather than the same ratio"},
			{"tail_calibrated", "bool", "true when the latency tail was modelled from the measured service-time quantiles, false when service was taken as exponential"},
			{"service_late_share", "1", "the modelled share of service times alone over the target (measured shape, or e^(−T/E[S]) when exponential)"},
			{"service_shape_weight", "1", "the measured service-time quantiles' weight against the exponential's in the modelled shape: the requests measured since the shape started ÷ those that put 1/θ² beyond the percentile, at most 1 (0: exponential, none measured)"},
			{"rate_cv2", "1", "averaged relative variance of the per-second arrival rate beyond Poisson noise; from 0.01 the model averages latencies over the seconds' rates"},
			{"arrival_rate_level", "1/s", "λ's mean over the level window, what the model sizes for while the rate varies from second to second (0: the cycle's λ)"},
			{"level_window_seconds", "s", "the level window: cv²/θ², whole cycles, at most 10 minutes"},
			{"dry_run", "bool", "true when nothing was changed"},
			{"reason", "text", "the decision's explanation"},
		},
	},
}

// Declares reports whether field is one of m's fields: declared by name, or a
// histogram's bucket (of one of BucketPrefixes: LatencyBucketPattern,
// ServiceBucketPattern, when m declares it) with a name ParseBucketField
// accepts.
func (m Measurement) Declares(field string) bool {
	for _, prefix := range BucketPrefixes {
		if _, isBucket, err := ParseBucketField(prefix, field); isBucket {
			if err != nil {
				return false // the pattern itself is no field's name
			}
			field = BucketPattern(prefix)
			break
		}
	}
	for _, f := range m.Fields {
		if f.Name == field {
			return true
		}
	}
	return false
}

// Lookup returns the measurement named name.
func Lookup(name string) (Measurement, bool) {
	for _, m := range Schema {
		if m.Name == name {
			return m, true
		}
	}
	return Measurement{}, false
}
