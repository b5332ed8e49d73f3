package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueAutoscaler keeps a scalable workload's request latency under a target. It reads
// like a HorizontalPodAutoscaler whose metric is latency: "p95 under 200 ms, 2 to 50
// replicas".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=qa,categories=all;qas
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.status.reference`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.targetSummary`
// +kubebuilder:printcolumn:name="Latency",type=string,JSONPath=`.status.measuredLatency`,description="measured latency at the target percentile"
// +kubebuilder:printcolumn:name="Modelled",type=string,JSONPath=`.status.modelledLatency`,priority=1
// +kubebuilder:printcolumn:name="MinPods",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="MaxPods",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.status.lastDecision.action`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type QueueAutoscaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   QueueAutoscalerSpec   `json:"spec"`
	Status QueueAutoscalerStatus `json:"status,omitempty"`
}

// QueueAutoscalerList is a list of QueueAutoscalers.
//
// +kubebuilder:object:root=true
type QueueAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []QueueAutoscaler `json:"items"`
}

// QueueAutoscalerSpec says which workload to scale, the latency it must meet and the
// levers QAS may pull.
//
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || has(self.target.percentile)",message="burst needs target.percentile: a declared rise is priced by its share of late requests, and a mean target has none"
type QueueAutoscalerSpec struct {
	// ScaleTargetRef is the workload, reached through its scale subresource, so any
	// scalable kind works.
	ScaleTargetRef CrossVersionObjectReference `json:"scaleTargetRef"`

	// MinReplicas is the lower bound on replicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	MinReplicas int32 `json:"minReplicas"`

	// MaxReplicas is the upper bound on replicas.
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`

	// Target is the latency objective.
	Target LatencyTarget `json:"target"`

	// Tolerance is θ: QAS leaves the replica count alone while modelled latency / target
	// stays within [1−θ, 1+θ].
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=0.99
	// +kubebuilder:default=0.1
	// +optional
	Tolerance float64 `json:"tolerance,omitempty"`

	// Concurrency is k, the requests one pod serves at once (the proxy's limit).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`

	// Model is the queue layout: pooled (one M/M/(n·k) queue), per-pod (n M/M/k queues,
	// as a Service spreads requests), or auto (whichever matches measured latency better).
	// Default: from routing (random: per-pod; leastRequest and pooled: pooled).
	// +kubebuilder:validation:Enum=pooled;per-pod;auto
	// +optional
	Model string `json:"model,omitempty"`

	// Routing says how requests reach the pods: random (a Kubernetes Service: each
	// pod its own queue), leastRequest (Envoy, Istio, Linkerd or IPVS least-connection
	// balancing: close to one pooled queue), or pooled (one queue in front of the pods,
	// a request goes to a pod only when it has a free place). It sets the default model
	// and how the decider expects a backlog to drain.
	// +kubebuilder:validation:Enum=random;leastRequest;pooled
	// +kubebuilder:default=random
	// +optional
	Routing string `json:"routing,omitempty"`

	// ServiceModel is the queue formula: "M/M/c", or "allen-cunneen" to correct for the
	// measured variability of arrivals and service times.
	// +kubebuilder:validation:Enum="M/M/c";allen-cunneen
	// +kubebuilder:default="M/M/c"
	// +optional
	ServiceModel string `json:"serviceModel,omitempty"`

	// Vertical allows in-place CPU resizing of the workload's pods.
	// +optional
	Vertical *VerticalSpec `json:"vertical,omitempty"`

	// Migration allows moving pods off nodes whose absolute CPU use is too high.
	// +optional
	Migration *MigrationSpec `json:"migration,omitempty"`

	// Predictive starts pods early by the measured pod start time.
	// +optional
	Predictive *PredictiveSpec `json:"predictive,omitempty"`

	// Behavior configures stabilisation and rate limits, as in the HPA.
	// +optional
	Behavior *Behavior `json:"behavior,omitempty"`

	// Burst declares a rise the workload may bring without warning, which its
	// history need not show (a new workload; a rise that comes once a month).
	// No autoscaler that does not know the future meets a rise it has not seen
	// without capacity held before it: the pods ready during its first pod
	// start were chosen before it began. QAS keeps the pods such a rise needs,
	// priced beside the jumps the history shows. Percentile targets only.
	// +optional
	Burst *BurstSpec `json:"burst,omitempty"`

	// MaxDataAge is how old the newest measurement may be for QAS to act on it, e.g.
	// "2m". Older data (qas-collector stopped, or its clock behind the decider's) makes
	// QAS hold, with the data's age in the ScalingActive condition. Keep it above the
	// collector's interval.
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('1h')",message="maxDataAge must be between 5s and 1h"
	// +kubebuilder:default="2m"
	// +optional
	MaxDataAge string `json:"maxDataAge,omitempty"`

	// DryRun makes QAS decide and explain, but change nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// CrossVersionObjectReference names the scaled workload.
type CrossVersionObjectReference struct {
	// APIVersion is "group/version" (apps/v1, example.com/v1beta1) or a core
	// version ("v1").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z]([-a-z0-9]*[a-z0-9])?$')",message="scaleTargetRef.apiVersion must be group/version (e.g. apps/v1) or a core version (v1)"
	APIVersion string `json:"apiVersion"`
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// LatencyTarget is the latency objective: the given percentile (or the mean) of request
// latency must stay under Latency.
//
// +kubebuilder:validation:XValidation:rule="duration(self.latency) > duration('0s')",message="target.latency must be a positive duration"
// +kubebuilder:validation:XValidation:rule="!has(self.percentile) || (self.percentile > 0.0 && self.percentile < 100.0)",message="target.percentile must be greater than 0 and less than 100"
type LatencyTarget struct {
	// Latency is the objective, e.g. "200ms".
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	Latency string `json:"latency"`
	// Percentile, e.g. 95 or 99.9. Leave it out to target the mean latency.
	// +optional
	Percentile *float64 `json:"percentile,omitempty"`
}

// VerticalSpec bounds in-place CPU resizing.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minCPU) || !has(self.maxCPU) || quantity(string(self.minCPU)).compareTo(quantity(string(self.maxCPU))) <= 0",message="vertical.minCPU must not exceed vertical.maxCPU"
type VerticalSpec struct {
	Enabled bool `json:"enabled"`
	// MinCPU and MaxCPU bound the CPU request per pod.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) > 0",message="vertical.minCPU must be a positive CPU quantity"
	// +optional
	MinCPU *resource.Quantity `json:"minCPU,omitempty"`
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) > 0",message="vertical.maxCPU must be a positive CPU quantity"
	// +optional
	MaxCPU *resource.Quantity `json:"maxCPU,omitempty"`
	// PodOverheadCPU is the per-pod cost added when comparing "more pods" with "bigger
	// pods" (sidecars, runtime).
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('0')) >= 0",message="vertical.podOverheadCPU must not be negative"
	// +optional
	PodOverheadCPU *resource.Quantity `json:"podOverheadCPU,omitempty"`
}

// MigrationSpec configures moving pods off hot nodes.
type MigrationSpec struct {
	Enabled bool `json:"enabled"`
	// NodeThreshold is φ: a node whose absolute CPU utilisation (usage / allocatable)
	// exceeds it is hot.
	// +kubebuilder:validation:XValidation:rule="self > 0.0 && self <= 1.0",message="migration.nodeThreshold must be in (0, 1]"
	// +kubebuilder:default=0.85
	// +optional
	NodeThreshold float64 `json:"nodeThreshold,omitempty"`
	// Mover is whose pod moves: our own (default: touches only what QAS owns) or the
	// biggest neighbour (the thesis' choice).
	// +kubebuilder:validation:Enum=own;neighbour
	// +kubebuilder:default=own
	// +optional
	Mover string `json:"mover,omitempty"`
	// AllowLocalStorage lets QAS move pods bound to node-local volumes.
	// +optional
	AllowLocalStorage bool `json:"allowLocalStorage,omitempty"`
	// Cooldown paces migrations, e.g. "5m". With the neighbour mover, QAS waits this
	// long after a migration ended before it starts another, and a node still hot
	// after a move off it waits longer after each further move: the cooldown, then
	// twice, four times and so on, at most an hour (or the cooldown, if longer). With
	// the own mover, moves that take the workload's pods off a hot node follow one
	// another at once; the cooldown and the doubling apply only after a move that
	// did not reduce the workload's pods on that node, or that timed out or was
	// aborted.
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="migration.cooldown must be between 1m and 24h"
	// +kubebuilder:default="5m"
	// +optional
	Cooldown string `json:"cooldown,omitempty"`
}

// PredictiveSpec configures scaling ahead of demand.
type PredictiveSpec struct {
	Enabled bool `json:"enabled"`
	// LeadOverride replaces the measured pod start time (p90 of creation to Ready).
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +optional
	LeadOverride string `json:"leadOverride,omitempty"`
}

// BurstSpec is a declared rise.
type BurstSpec struct {
	// Rise is the largest multiple of the arrival rate (its mean over the last
	// pod start time) that may come within one pod start time without warning.
	// +kubebuilder:validation:ExclusiveMinimum=true
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Rise float64 `json:"rise"`
	// Every is how often at most such a rise comes, e.g. "1h": the rise is
	// priced as one pod start time in every such period (its share of the late
	// requests the SLO allows).
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('720h')",message="burst.every must be between 1m and 720h"
	// +kubebuilder:default="1h"
	// +optional
	Every string `json:"every,omitempty"`
}

// Behavior configures scaling in each direction.
type Behavior struct {
	// +optional
	ScaleUp *ScalingRules `json:"scaleUp,omitempty"`
	// +optional
	ScaleDown *ScalingRules `json:"scaleDown,omitempty"`
}

// ScalingRules are HPA-style stabilisation and rate limits for one direction.
type ScalingRules struct {
	// StabilizationWindowSeconds: scale to the most conservative recommendation of
	// this window.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`
	// SelectPolicy picks among Policies: Max, Min, or Disabled (no scaling this way).
	// +kubebuilder:validation:Enum=Max;Min;Disabled
	// +optional
	SelectPolicy string `json:"selectPolicy,omitempty"`
	// Policies limit the change per period.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	// +optional
	Policies []ScalingPolicy `json:"policies,omitempty"`
}

// ScalingPolicy limits a change to Value pods, or Value percent, per PeriodSeconds.
type ScalingPolicy struct {
	// +kubebuilder:validation:Enum=Pods;Percent
	Type string `json:"type"`
	// +kubebuilder:validation:Minimum=1
	Value int32 `json:"value"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1800
	PeriodSeconds int32 `json:"periodSeconds"`
}

// QueueAutoscalerStatus is what QAS last observed and decided.
type QueueAutoscalerStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Reference is "Kind/name" of the scaled workload (for kubectl get).
	// +optional
	Reference string `json:"reference,omitempty"`
	// TargetSummary is the objective in short form, e.g. "p95<200ms" (for kubectl get).
	// +optional
	TargetSummary string `json:"targetSummary,omitempty"`
	// ArrivalRate is the measured request rate λ, in requests per second.
	// +optional
	ArrivalRate string `json:"arrivalRate,omitempty"`
	// ServiceTime is the measured mean service time E[S].
	// +optional
	ServiceTime string `json:"serviceTime,omitempty"`
	// MeasuredLatency is the latency at the target percentile measured by the proxies.
	// +optional
	MeasuredLatency string `json:"measuredLatency,omitempty"`
	// ModelledLatency is the queueing model's latency for the current replicas.
	// +optional
	ModelledLatency string `json:"modelledLatency,omitempty"`
	// CurrentReplicas and DesiredReplicas are the replica counts now and as decided.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas,omitempty"`
	// CurrentCPU and DesiredCPU are the CPU request per pod now and as decided.
	// +optional
	CurrentCPU *resource.Quantity `json:"currentCPU,omitempty"`
	// +optional
	DesiredCPU *resource.Quantity `json:"desiredCPU,omitempty"`
	// InitTime is the measured pod start time (p90 of creation to first Ready over
	// recent pods): the predictive lead unless predictive.leadOverride replaces it.
	// It is reported whether or not predictive scaling is on.
	// +optional
	InitTime string `json:"initTime,omitempty"`
	// LastDecision is the most recent decision and why it was taken.
	// +optional
	LastDecision *DecisionSummary `json:"lastDecision,omitempty"`
	// Conditions: Ready, AbleToScale, ScalingActive, ScalingLimited.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DecisionSummary explains one decision; the full explanation goes to an Event, the log
// and InfluxDB.
type DecisionSummary struct {
	Time metav1.Time `json:"time"`
	// Action is None, Horizontal, Vertical, Migrate or a combination.
	Action string `json:"action"`
	// Reason is the decision's explanation in one sentence.
	Reason string `json:"reason"`
	// Model names the queue model used, e.g. "per-pod M/M/c".
	// +optional
	Model string `json:"model,omitempty"`
	// DryRun is true when the action was only recorded.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}
