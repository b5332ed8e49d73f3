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
	// The pooled data plane's workload fields the decider reads.
	FieldOverflowShare    = "overflow_share"
	FieldFrontQueueLength = "front_queue_length"
)
