// Package limit is qas-proxy's per-pod concurrency limit k with a bounded FIFO queue,
// shared by the general and the fast serving paths so both admit and measure requests
// the same way.
package limit

import (
	"sync/atomic"
	"time"

	"github.com/qas-dev/qas/proxy/measure"
)

// Result is the outcome of Admit.
type Result uint8

const (
	// Admitted: the request holds a slot; call Release when it ends.
	Admitted Result = iota
	// Full: all k slots are busy and the queue is full; answer 503 with Retry-After.
	Full
	// Gone: the client left while the request waited; nothing is to be answered.
	Gone
	// Drained: the pod is draining and the request would wait, or waited: it
	// holds its place in the queue but no slot, untouched, so that it can be
	// offered to a shared front; then Readmit (served here after all) or Leave.
	Drained
)

// RetryAfter is the Retry-After value, in seconds, sent with a 503 from a full queue.
const RetryAfter = "1"

// Limiter admits at most k requests at once, queueing at most q more.
// A nil *Limiter admits everything.
type Limiter struct {
	slots   chan struct{}
	queue   int64
	waiting atomic.Int64
	// freed, when set (pooling only: EnableFreed), receives a token whenever a slot
	// is released, to wake the pull loops.
	freed chan struct{}
}

// New returns a Limiter for k slots and a queue of q, or nil when k is 0 (no limit).
func New(k, q int) *Limiter {
	if k <= 0 {
		return nil
	}
	return &Limiter{slots: make(chan struct{}, k), queue: int64(q)}
}

// Admit takes a slot for a request that arrived at arrived, waiting in the queue
// (first come, first served: blocked channel senders are woken in order) until a slot
// frees or gone is closed or receives. It records the wait, the rejection or the
// abandonment in rec exactly as the proxy has always measured them: queue wait apart
// from service time, and a rejected or abandoned request counted as completed with a
// 503.
func (l *Limiter) Admit(rec *measure.Recorder, arrived time.Time, gone <-chan struct{}) Result {
	return l.admit(rec, arrived, gone, nil)
}

// AdmitOrDrain is Admit, except that a request that has to wait when drain is
// closed, or waits when it closes, returns Drained: nothing of it was read, and it
// keeps its place in the queue (the queue bound counts it) while the caller offers
// it elsewhere; the caller then calls Readmit (it is served here after all) or
// Leave (it went elsewhere). Its wait is not recorded as queued until Readmit
// records the whole of it. A nil drain never closes.
func (l *Limiter) AdmitOrDrain(rec *measure.Recorder, arrived time.Time, gone, drain <-chan struct{}) Result {
	return l.admit(rec, arrived, gone, drain)
}

// Readmit waits for a slot for a request that AdmitOrDrain returned Drained for, in
// the place it kept; its wait is recorded from arrived. It never returns Full or
// Drained.
func (l *Limiter) Readmit(rec *measure.Recorder, arrived time.Time, gone <-chan struct{}) Result {
	if l == nil {
		return Admitted
	}
	rec.StartWaiting()
	return l.wait(rec, arrived, gone, nil)
}

// Leave gives up the place of a request that AdmitOrDrain returned Drained for
// and that went elsewhere.
func (l *Limiter) Leave() {
	if l != nil {
		l.waiting.Add(-1)
	}
}

func (l *Limiter) admit(rec *measure.Recorder, arrived time.Time, gone, drain <-chan struct{}) Result {
	if l == nil {
		return Admitted
	}
	select {
	case l.slots <- struct{}{}:
		return Admitted
	default:
	}
	if l.waiting.Add(1) > l.queue {
		l.waiting.Add(-1)
		rec.Reject(arrived)
		return Full
	}
	select {
	case <-drain:
		// Draining already: it would wait, so it is offered elsewhere first.
		return Drained
	default:
	}
	rec.StartWaiting()
	return l.wait(rec, arrived, gone, drain)
}

// wait waits in the queue for a slot; the caller counted the request in l.waiting
// and rec's waiting gauge.
func (l *Limiter) wait(rec *measure.Recorder, arrived time.Time, gone, drain <-chan struct{}) Result {
	select {
	case l.slots <- struct{}{}:
		l.waiting.Add(-1)
		rec.StopWaiting(rec.Now().Sub(arrived))
		return Admitted
	case <-gone:
		l.waiting.Add(-1)
		rec.StopWaiting(rec.Now().Sub(arrived))
		rec.Reject(arrived)
		return Gone
	case <-drain:
		// Its place stays counted in l.waiting until Readmit or Leave.
		rec.LeaveWaiting()
		return Drained
	}
}

// Release gives back the slot of an admitted request.
func (l *Limiter) Release() {
	if l != nil {
		<-l.slots
		if l.freed != nil {
			select {
			case l.freed <- struct{}{}:
			default:
			}
		}
	}
}

// EnableFreed makes Release signal the returned channel (capacity 1: a signal means
// "at least one slot was released since the last receive"). Call it before serving.
func (l *Limiter) EnableFreed() <-chan struct{} {
	l.freed = make(chan struct{}, 1)
	return l.freed
}

// Saturated reports whether every slot is busy and no request waits: the moment a
// new request may overflow to a shared front instead of queueing (an older waiting
// request would be served first, so a newer one joins it).
func (l *Limiter) Saturated() bool {
	return l != nil && len(l.slots) == cap(l.slots) && l.waiting.Load() == 0
}

// Busy reports whether every slot is busy (requests may wait as well).
func (l *Limiter) Busy() bool {
	return l != nil && len(l.slots) == cap(l.slots)
}

// Idle reports whether a slot is free and no request waits: the moment to pull work
// from a shared front.
func (l *Limiter) Idle() bool {
	return l != nil && len(l.slots) < cap(l.slots) && l.waiting.Load() == 0
}

// TryAdmit takes a free slot without waiting, and only while no request waits, so a
// pulled request never goes ahead of a local one. The caller records the request
// (TryAdmit records nothing) and calls Release when it ends.
func (l *Limiter) TryAdmit() bool {
	if l == nil || l.waiting.Load() > 0 {
		return false
	}
	select {
	case l.slots <- struct{}{}:
		return true
	default:
		return false
	}
}
