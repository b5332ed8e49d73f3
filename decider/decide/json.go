package decide

import (
	"encoding/json"
	"fmt"
	"math"
)

// MarshalText names the actions ("none", "horizontal+vertical", ...).
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses what MarshalText writes.
func (a *Action) UnmarshalText(b []byte) error {
	var out Action
	s := string(b)
	if s == "none" || s == "" {
		*a = ActionNone
		return nil
	}
	for _, part := range splitPlus(s) {
		switch part {
		case "horizontal":
			out |= ActionHorizontal
		case "vertical":
			out |= ActionVertical
		case "migrate":
			out |= ActionMigrate
		default:
			return fmt.Errorf("unknown action %q", part)
		}
	}
	*a = out
	return nil
}

func splitPlus(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '+' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// finite returns a pointer to v, or nil for ±Inf and NaN, which JSON cannot
// carry: an unstable queue's latency is written as null.
func finite(v float64) *float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return nil
	}
	return &v
}

// MarshalJSON writes the explanation with durations in seconds and
// non-finite latencies (unstable queues) as null.
func (x Explanation) MarshalJSON() ([]byte, error) {
	type plain Explanation
	return json.Marshal(struct {
		plain
		Latency          *float64 `json:"latency"`
		Normalized       *float64 `json:"normalized"`
		SizingNormalized *float64 `json:"sizingNormalized"`
		LeadSeconds      float64  `json:"leadSeconds"`
	}{plain(x), finite(x.Latency), finite(x.Normalized), finite(x.SizingNormalized), x.Lead.Seconds()})
}

// MarshalJSON writes a candidate with a non-finite latency as null.
func (c Candidate) MarshalJSON() ([]byte, error) {
	type plain Candidate
	return json.Marshal(struct {
		plain
		ModelledLatency *float64 `json:"modelledLatency"`
	}{plain(c), finite(c.ModelledLatency)})
}

// MarshalJSON writes the move time in seconds.
func (m MigrationPlan) MarshalJSON() ([]byte, error) {
	type plain MigrationPlan
	return json.Marshal(struct {
		plain
		MoveSeconds float64 `json:"moveSeconds"`
	}{plain(m), m.MoveTime.Seconds()})
}
