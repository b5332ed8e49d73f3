package decide

import (
	"errors"
)

// Engine decides for one workload and keeps what must persist across its
// cycles: the recommendation history for stabilisation and the recent scale
// events for rate limits. Use one Engine per workload. An Engine is not safe for
// concurrent use; different Engines are independent.
type Engine struct {
	recs   []recommendation
	events []scaleEvent
}

type recommendation struct {
	at       int64 // unix nanoseconds
	replicas int32
}

type scaleEvent struct {
	at    int64
	delta int32 // replicas added (>0) or removed (<0)
}

// NewEngine returns an Engine with no history.
func NewEngine() *Engine { return &Engine{} }

// Decide returns the decision for spec and snap at snap.Now and records it in
// the engine's history. An invalid spec or snapshot returns an error and records
// nothing.
func (e *Engine) Decide(spec Spec, snap Snapshot) (Decision, error) {
	if err := Validate(spec); err != nil {
		return Decision{}, err
	}
	return Decision{}, errors.New("decide: engine not implemented yet")
}
