package influx

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Tag and field names that both the writers and the decider's reader use, so that a
// renamed field is a compile error, not a silently empty read. Schema declares each
// of them (TestFieldConstantsDeclared).
const (
	TagNamespace = "namespace"
	TagWorkload  = "workload"
	TagPod       = "pod"
	TagNode      = "node"

	FieldArrivalRate = "arrival_rate"
	FieldServiceMean = "service_mean_seconds"
	FieldServiceSCV  = "service_scv"
	// FieldServiceSamples is the requests the workload's service-time fields
	// are over: the decider pools intervals by it (decide/service.go).
	FieldServiceSamples = "service_samples"
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
	// Accepted overflows the fronts gave back unseen (past their maximum wait, or
	// at shutdown), per second, by what the sender did: served them itself, or
	// relayed the front's 503; and the overflows a front refused with its queue
	// full.
	FieldExpiredRequeuedRate  = "expired_requeued_rate"
	FieldExpiredRelayedRate   = "expired_relayed_rate"
	FieldFrontRefusedFullRate = "front_refused_full_rate"

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

// The latency histogram's buckets (qas_workload): one field per bucket (a whole
// count, as a float), named by its upper bound in seconds, counting the requests
// whose latency is at most that bound and above the next lower bucket field's
// bound (the collector leaves out empty buckets below empty ones).
// LatencyBucketPattern is how the schema declares them.
const (
	LatencyBucketPrefix   = "latency_bucket_le_"
	FieldLatencyBucketInf = LatencyBucketPrefix + "inf"
	LatencyBucketPattern  = LatencyBucketPrefix + boundPlaceholder
)

// The service-time histogram's buckets (qas_workload), as the latency
// histogram's are written (in the same bounds: a proxy counts service times in
// its latency buckets): the served requests whose service time is at most the
// bound and above the next lower bucket field's.
const (
	ServiceBucketPrefix   = "service_bucket_le_"
	FieldServiceBucketInf = ServiceBucketPrefix + "inf"
	ServiceBucketPattern  = ServiceBucketPrefix + boundPlaceholder
)

// BucketPrefixes are the prefixes of every histogram written as bucket fields
// (BucketField): none is a prefix of another.
var BucketPrefixes = []string{LatencyBucketPrefix, ServiceBucketPrefix}

// boundPlaceholder stands for the bound in a bucket field pattern: no bound
// ParseBucketField accepts reads so.
const boundPlaceholder = "<bound>"

// BucketPattern is how the schema declares the bucket fields of prefix.
func BucketPattern(prefix string) string { return prefix + boundPlaceholder }

// BucketField names the field of the bucket with upper bound bound among the
// bucket fields of prefix (one of BucketPrefixes): prefix and the shortest
// decimal that reads back as bound ("latency_bucket_le_0.0001",
// "service_bucket_le_60"), or prefix + "inf" for +Inf. A bound ParseBucketField
// refuses (not a positive number) gives a name it refuses too.
func BucketField(prefix string, bound float64) string {
	if math.IsInf(bound, 1) {
		return prefix + "inf"
	}
	return prefix + strconv.FormatFloat(bound, 'f', -1, 64)
}

// ParseBucketField reads a bucket field's name of prefix back. isBucket is
// false for a name without prefix (another field, no error). A bucket field's
// name must be one BucketField writes: a positive finite bound in its shortest
// decimal form, or "inf"; anything else ("0.20", "+0.2", "1e-4", "NaN", "-1")
// is an error naming it, so that two names never stand for one bucket.
func ParseBucketField(prefix, name string) (bound float64, isBucket bool, err error) {
	suffix, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false, nil
	}
	if suffix == "inf" {
		return math.Inf(1), true, nil
	}
	v, perr := strconv.ParseFloat(suffix, 64)
	switch {
	case perr != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, true, fmt.Errorf("influx: field %q: the bound %q is not a number", name, suffix)
	case v <= 0:
		return 0, true, fmt.Errorf("influx: field %q: the bound %v is not positive", name, v)
	case BucketField(prefix, v) != name:
		return 0, true, fmt.Errorf("influx: field %q is not in its canonical form %q", name, BucketField(prefix, v))
	}
	return v, true, nil
}

// LatencyBucketField is BucketField of LatencyBucketPrefix
// ("latency_bucket_le_0.2", FieldLatencyBucketInf for +Inf).
func LatencyBucketField(bound float64) string { return BucketField(LatencyBucketPrefix, bound) }

// ParseLatencyBucketField is ParseBucketField of LatencyBucketPrefix.
func ParseLatencyBucketField(name string) (bound float64, isBucket bool, err error) {
	return ParseBucketField(LatencyBucketPrefix, name)
}

// ServiceBucketField is BucketField of ServiceBucketPrefix
// ("service_bucket_le_0.2", FieldServiceBucketInf for +Inf).
func ServiceBucketField(bound float64) string { return BucketField(ServiceBucketPrefix, bound) }

// ParseServiceBucketField is ParseBucketField of ServiceBucketPrefix.
func ParseServiceBucketField(name string) (bound float64, isBucket bool, err error) {
	return ParseBucketField(ServiceBucketPrefix, name)
}
