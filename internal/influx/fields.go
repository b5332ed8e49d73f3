package influx

// Tag and field names that both the writers and the decider's reader use, so that a
// renamed field is a compile error, not a silently empty read. Schema declares each
// of them (TestFieldConstantsDeclared).
const (
	TagNamespace = "namespace"
	TagWorkload  = "workload"
	TagPod       = "pod"
	TagNode      = "node"

	FieldArrivalRate    = "arrival_rate"
	FieldServiceMean    = "service_mean_seconds"
	FieldServiceSCV     = "service_scv"
	FieldLatencyP50     = "latency_p50_seconds"
	FieldLatencyP95     = "latency_p95_seconds"
	FieldLatencyP99     = "latency_p99_seconds"
	FieldCPUUsage       = "cpu_usage_cores"
	FieldCPURequest     = "cpu_request_cores"
	FieldCPULimit       = "cpu_limit_cores"
	FieldCPUAllocatable = "cpu_allocatable_cores"
	FieldInFlight       = "in_flight"
	FieldWaiting        = "waiting"
	FieldInFlightMean   = "in_flight_mean"
	FieldClockOffset    = "clock_offset_seconds"
	// The per-second arrival rate's relative variance beyond Poisson noise
	// (qas_workload, issue #15) and the pairs of seconds it is estimated from.
	FieldArrivalRateCV2   = "arrival_rate_cv2"
	FieldArrivalRatePairs = "arrival_rate_pairs"
	// The pooled data plane's workload fields the decider reads.
	FieldOverflowShare    = "overflow_share"
	FieldFrontQueueLength = "front_queue_length"

	// The service time's quantiles (qas_workload), at proxy/stats.ServicePercentiles.
	FieldServiceP50  = "service_p50_seconds"
	FieldServiceP75  = "service_p75_seconds"
	FieldServiceP90  = "service_p90_seconds"
	FieldServiceP95  = "service_p95_seconds"
	FieldServiceP975 = "service_p97_5_seconds"
	FieldServiceP99  = "service_p99_seconds"
	FieldServiceP995 = "service_p99_5_seconds"
	FieldServiceP999 = "service_p99_9_seconds"
)

// ServiceQuantileFields are the service-quantile fields in the order of
// proxy/stats.ServicePercentiles (a collector test checks the two agree).
var ServiceQuantileFields = []string{FieldServiceP50, FieldServiceP75, FieldServiceP90, FieldServiceP95,
	FieldServiceP975, FieldServiceP99, FieldServiceP995, FieldServiceP999}
