package resources

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/decide"
)

// TestProxyClockCondition: a proxy clock more than 10 s from the collector's, either
// way, is a ProxyClockSkew condition that names the direction; it turns False when the
// clocks agree again, is not added while they always have, and a value that is not a
// measurement changes nothing.
func TestProxyClockCondition(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	find := func(st *v1alpha1.QueueAutoscalerStatus) *metav1.Condition {
		for i := range st.Conditions {
			if st.Conditions[i].Type == "ProxyClockSkew" {
				return &st.Conditions[i]
			}
		}
		return nil
	}
	steps := []struct {
		name    string
		offset  float64
		status  metav1.ConditionStatus // "" means no condition
		reason  string
		message string
	}{
		{"clocks agree from the start", 2, "", "", ""},
		{"one proxy 3 minutes ahead", 180, metav1.ConditionTrue, "ProxyClockAhead", "3m0s ahead of"},
		{"not a measurement", math.NaN(), metav1.ConditionTrue, "ProxyClockAhead", "3m0s ahead of"},
		{"one proxy behind", -42.4, metav1.ConditionTrue, "ProxyClockBehind", "42s behind"},
		{"within the tolerance", -10, metav1.ConditionFalse, "ClocksAgree", "within 10s"},
		{"agreeing still", 0, metav1.ConditionFalse, "ClocksAgree", "within 10s"},
	}
	var st v1alpha1.QueueAutoscalerStatus
	for i, s := range steps {
		ProxyClockCondition(&st, s.offset, 1, now.Add(time.Duration(i)*time.Minute))
		c := find(&st)
		if s.status == "" {
			require.Nil(t, c, s.name)
			continue
		}
		require.NotNil(t, c, s.name)
		require.Equal(t, s.status, c.Status, s.name)
		require.Equal(t, s.reason, c.Reason, s.name)
		require.Contains(t, c.Message, s.message, s.name)
	}
}

// TestRecurrenceCondition: the detector's finding is the RecurringBursts
// condition, its note the message; no long history leaves it as it was.
func TestRecurrenceCondition(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	steps := []struct {
		name   string
		r      *decide.Recurrence
		status metav1.ConditionStatus // "" means no condition
		reason string
	}{
		{"no long history", nil, "", ""},
		{"nothing recurs", &decide.Recurrence{Note: "4 onsets in 24h0m0s of history, no 3 of them on one period: reactive"}, metav1.ConditionFalse, "NoRecurrence"},
		{"a period", &decide.Recurrence{PeriodSeconds: 1200, Note: "bursts recur every 20m0s"}, metav1.ConditionTrue, "Recurring"},
		{"history read failed", nil, metav1.ConditionTrue, "Recurring"},
		{"the forecast burst did not come", &decide.Recurrence{PeriodSeconds: 1200, Contradicted: true, Note: "did not come"}, metav1.ConditionFalse, "ForecastBurstMissed"},
	}
	var st v1alpha1.QueueAutoscalerStatus
	for i, s := range steps {
		RecurrenceCondition(&st, s.r, 1, now.Add(time.Duration(i)*time.Minute))
		var c *metav1.Condition
		for j := range st.Conditions {
			if st.Conditions[j].Type == "RecurringBursts" {
				c = &st.Conditions[j]
			}
		}
		if s.status == "" {
			require.Nil(t, c, s.name)
			continue
		}
		require.NotNil(t, c, s.name)
		require.Equal(t, s.status, c.Status, s.name)
		require.Equal(t, s.reason, c.Reason, s.name)
		if s.r != nil {
			require.Equal(t, s.r.Note, c.Message, s.name)
		}
	}
}

// TestModelSummaryNamesTheTail: the status says whether the latency tail was
// calibrated from measured service times or taken as exponential (a held
// decision, which modelled nothing, says neither).
func TestModelSummaryNamesTheTail(t *testing.T) {
	for _, tc := range []struct {
		tail, want string
	}{
		{decide.TailMeasured, "per-pod allen-cunneen, measured service tail"},
		{decide.TailExponential, "per-pod allen-cunneen, exponential service tail"},
		{"", "per-pod allen-cunneen"},
	} {
		x := decide.Explanation{Model: decide.ModelPerPod, ServiceModel: decide.ServiceAllenCunneen, TailModel: tc.tail}
		require.Equal(t, tc.want, modelSummary(x))
	}
}
