package resources

import (
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReadyTracker remembers when each pod first became Ready, the end of its start-up.
// The pod's Ready condition alone cannot tell: after a NotReady→Ready flap (a
// readiness probe failing for a while, a container restart) its transition time is
// the flap's, and creation→Ready would count the pod's whole life up to it as
// start-up time. The controller sees every pod change through its informer, so it
// keeps the first Ready transition per pod UID and ignores later ones.
//
// A pod whose creation the tracker saw (it appeared while the informer watched, not
// yet Ready) gives a trusted sample whatever happens next: restarts before its first
// Ready are part of its start-up. A pod first seen later (already running when the
// decider started) gives a sample only while none of its containers has restarted;
// otherwise its Ready condition may be a later flap and the pod is ignored. (A
// readiness flap without a restart leaves no trace on the pod; for such a pod seen
// only after the flap the sample is as long as its life before the flap.)
//
// It is safe for concurrent use.
type ReadyTracker struct {
	mu   sync.Mutex
	pods map[types.UID]*readyRecord
}

type readyRecord struct {
	watched bool      // seen not yet Ready from its creation on
	seen    bool      // it has been seen Ready
	first   time.Time // the Ready transition time when it was first seen Ready
	trusted bool      // first is its first Ready transition
}

// NewReadyTracker returns an empty tracker.
func NewReadyTracker() *ReadyTracker {
	return &ReadyTracker{pods: map[types.UID]*readyRecord{}}
}

// Observe records what p's status says now. created is true when the informer
// reports p as new while watching (not in its initial list).
func (t *ReadyTracker) Observe(p *corev1.Pod, created bool) {
	readyAt, ready := readyTransition(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.pods[p.UID]
	if !ok {
		r = &readyRecord{watched: created && !ready}
		t.pods[p.UID] = r
	}
	if r.seen || !ready {
		return
	}
	r.seen = true
	r.first = readyAt
	r.trusted = r.watched || !restarted(p)
}

// Forget drops a deleted pod.
func (t *ReadyTracker) Forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// FirstReady returns the pod's first Ready transition, and false when it has not
// been Ready yet or its first Ready is unknown.
func (t *ReadyTracker) FirstReady(uid types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.pods[uid]
	if !ok || !r.seen || !r.trusted || r.first.IsZero() {
		return time.Time{}, false
	}
	return r.first, true
}

// readyTransition returns when the pod's Ready condition last turned True, and
// whether it is True now.
func readyTransition(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time, c.Status == corev1.ConditionTrue
		}
	}
	return time.Time{}, false
}

// restarted reports whether any of the pod's containers has restarted.
func restarted(p *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.RestartCount > 0 {
				return true
			}
		}
	}
	return false
}

// InitTimes returns, for each pod whose first Ready transition the tracker knows, the
// time from its creation to it: the pod start time the predictive lead is based on.
// Pods never Ready, with an unknown first Ready, or Ready before they were created
// (clock skew), give no sample. At most limit samples are returned, the most recent
// pods first, so the estimate follows recent start-up behaviour instead of every pod
// ever.
func InitTimes(pods []*corev1.Pod, t *ReadyTracker, limit int) []time.Duration {
	type sample struct {
		created time.Time
		d       time.Duration
	}
	var samples []sample
	for _, p := range pods {
		first, ok := t.FirstReady(p.UID)
		if !ok {
			continue
		}
		if d := first.Sub(p.CreationTimestamp.Time); d >= 0 {
			samples = append(samples, sample{created: p.CreationTimestamp.Time, d: d})
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].created.After(samples[j].created) })
	if limit > 0 && len(samples) > limit {
		samples = samples[:limit]
	}
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.d
	}
	return out
}
