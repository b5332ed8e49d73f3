package chart

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxdb-client-go/v2/api/write"
	"go.uber.org/zap"

	"github.com/qas-dev/qas/collector/aggregate"
	"github.com/qas-dev/qas/collector/cpu"
	"github.com/qas-dev/qas/collector/pipeline"
	"github.com/qas-dev/qas/collector/scrape"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/ratevar"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// What Grafana asks of a Flux panel over 7 days: a panel about 1,000 px wide asks for
// maxDataPoints = 1000, so v.windowPeriod is 7 d / 1000 ≈ 605 s, rounded to 10m; its
// Flux backend refuses a frame (one table of the result) of more than 10 × maxDataPoints
// rows and a result of more than 1,000 series.
const (
	weekWindowPeriod  = "10m"
	weekMaxFrameRows  = 10 * 1000
	weekMaxSeries     = 1000
	decisionsPerCycle = 15 * time.Second
)

// writeWeek writes 7 days up to now of what QAS writes, through the project's own point
// builders and writer: for the workloads web and api in namespace shop, a decision every
// 15 s (mostly none; scaling every 15 min, resizing every 2 h, some migrations), and every minute the
// workload (web with the pooled data plane's fields), its two pods and the two nodes. It
// returns the decisions that acted, per workload.
func writeWeek(t *testing.T, db *influxtest.Server, now time.Time) map[string]int {
	t.Helper()
	w, err := influx.NewWriter(influx.WriterConfig{URL: db.URL, Bucket: influxtest.Bucket, BufferPoints: 400_000, FlushInterval: 100 * time.Millisecond},
		nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	start := now.Add(-7 * 24 * time.Hour)
	acted := map[string]int{}
	var pts []*write.Point
	flush := func() {
		w.Write(pts...)
		pts = pts[:0]
	}
	for _, wl := range []string{"web", "api"} {
		for i, at := 0, start; !at.After(now); i, at = i+1, at.Add(decisionsPerCycle) {
			daily := 1 + math.Sin(2*math.Pi*at.Sub(start).Hours()/24)
			replicas := int32(3 + math.Round(4*daily))
			d := decide.Decision{Time: at, Action: decide.ActionNone, DesiredReplicas: replicas, DesiredCPU: 0,
				Explanation: decide.Explanation{CurrentReplicas: replicas, ArrivalRate: 40 * daily, ForecastArrivalRate: 42 * daily,
					ServiceTime: 0.05, Latency: 0.12, MeasuredLatency: 0.13, Target: 0.2, Lead: 20 * time.Second, Normalized: 0.6,
					Reason: "modelled latency within tolerance",
					// The batch model and the closed loop (docs/model.md section 2c).
					RateCV2: 0.4 * daily, ArrivalRateLevel: 38*daily + 1, LevelWindow: 90 * time.Second,
					MeasuredLateShare: 0.04 + 0.01*daily, ModelledLateShare: 0.045, TransientLateShare: 0.002 * daily,
					LatencyBias: 1 + 0.5*daily, EffectivePercentile: 95 + 0.4*daily,
					// The scale-down's margin, the last hour keeping a pod more
					// (docs/model.md section 2c, round thirty), and the jumps from
					// a like depth another (round thirty-one).
					DownLateShare: 0.04 + 0.005*daily, RecentJumps: 225, RecentMarginReplicas: replicas + 1,
					Depth: 0.4 + 0.2*daily, DepthJumps: 713, DepthMarginReplicas: replicas + 2}}
			if wl == "web" {
				// web pools: the decider read its fronts' expiries (withPooling's
				// requeued + relayed) and counted them as backlog over a 15 s interval.
				x := &d.Explanation
				x.FrontExpiredRate, x.FrontRefusedRate = 0.03, 0.05*daily
				x.BacklogExpired, x.ExpiredLateShare = 0.03*15, min(1, 0.03/max(x.ArrivalRate, 0.03))
			}
			switch {
			case i%60 == 0:
				d.Action, d.DesiredReplicas, d.Explanation.Reason = decide.ActionHorizontal, replicas+1, "scale out: forecast λ needs one more pod"
			case i%480 == 301:
				d.Action, d.DesiredCPU, d.Explanation.Reason = decide.ActionVertical, 750, "resize: 750m per pod is cheaper than a pod"
			case i%2000 == 1000:
				d.Action, d.Explanation.Reason = decide.ActionMigrate, "migrate: node n1 above φ"
			case i%7 == 3:
				d.Explanation.HeldBecause = "stabilisation window"
			}
			if d.Action != decide.ActionNone {
				acted[wl]++
			}
			pts = append(pts, store.DecisionPoint("shop", wl, wl, d, false))
			if i%4 == 0 {
				// 60 pairs of seconds of mean mu whose rate varies by cv² 0.4·daily.
				mu := 1 + 40*daily
				sums := ratevar.Sums{Pairs: 60, Counts: uint64(120 * mu), DiffSq: uint64(120 * (mu + 0.4*daily*mu*mu))}
				m := aggregate.Metrics{Time: at, ArrivalRate: 40 * daily, ServiceMean: 0.05, ServiceSCV: 1, InFlightMean: 2 * daily,
					BusyRatio: 0.5, LatencyP50: 0.04, LatencyP95: 0.13, LatencyP99: 0.25, Pods: 2, ArrivalRateSums: sums}
				cv2, err := ratevar.CV2(sums)
				if err != nil {
					t.Fatal(err)
				}
				m.ArrivalRateCV2 = cv2
				if wl == "web" {
					m = withPooling(m, daily) // web pools (routing: pooled), api does not
				}
				pts = append(pts, pipeline.WorkloadPoint("shop", wl, m))
				for j, node := range []string{"n1", "n2"} {
					pod := pipeline.PodPoint(scrape.Target{Namespace: "shop", Workload: wl, Pod: fmt.Sprintf("%s-%d", wl, j), Node: node}, m)
					pod.AddField("cpu_usage_cores", 0.3*daily)
					pod.AddField("cpu_request_cores", 0.5)
					pod.AddField("cpu_limit_cores", 1.0)
					pts = append(pts, pod)
					if wl == "web" {
						pts = append(pts, cpu.NodePoint(cpu.NodeCPU{Name: node, Time: at, Usage: 4 * daily, Allocatable: 16}))
					}
				}
			}
			if len(pts) >= 10_000 {
				flush()
			}
		}
	}
	flush()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, dropped := w.Counts(); dropped != 0 {
		t.Fatalf("the writer dropped %v points", dropped)
	}
	return acted
}

// fluxFrames splits an annotated Flux CSV response into its tables (Grafana's frames)
// and returns each table's rows, keyed by result and table number.
func fluxFrames(t *testing.T, out string) map[string][]map[string]string {
	t.Helper()
	r := csv.NewReader(strings.NewReader(out))
	r.FieldsPerRecord = -1
	frames := map[string][]map[string]string{}
	var header []string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatalf("flux CSV: %v", err)
		}
		switch {
		case len(rec) == 0 || strings.HasPrefix(rec[0], "#") || (len(rec) == 1 && rec[0] == ""):
			header = nil
		case header == nil:
			header = rec
		default:
			row := map[string]string{}
			for i, c := range header {
				if i < len(rec) {
					row[c] = rec[i]
				}
			}
			key := row["result"] + "/" + row["table"]
			frames[key] = append(frames[key], row)
		}
	}
}

// TestDashboardsOverSevenDays runs every query of the shipped dashboards, as Grafana
// expands them for the last 7 days, on a real InfluxDB 1.8 holding a week of what QAS
// writes (about 40,000 decisions per workload). Every query must run and return data
// within what Grafana's Flux backend accepts (frames of at most 10 × maxDataPoints
// rows, at most 1,000 series); decision series are one per field whatever actions were
// taken; the annotation and the Decisions table show only decisions that acted.
func TestDashboardsOverSevenDays(t *testing.T) {
	db := influxtest.Start(t)
	now := time.Now().Truncate(time.Second)
	acted := writeWeek(t, db, now)
	vars := map[string][]string{"bucket": one(influxtest.Bucket), "namespace": one("shop"), "workload": one("web"),
		"queueautoscaler": one("web"), "node": one("n1"), "nodes": {"n1", "n2"}}
	ctx := context.Background()
	queries := dashboardQueries(t)
	windows := int(7*24*time.Hour/(10*time.Minute)) + 2
	for _, where := range slices.Sorted(func(yield func(string) bool) {
		for k := range queries {
			if !yield(k) {
				return
			}
		}
	}) {
		q := grafanaExpandRange(queries[where], vars, "-7d", "now()", weekWindowPeriod)
		out, err := fluxQuery(ctx, db.URL, q)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, q)
			continue
		}
		frames := fluxFrames(t, out)
		rows := 0
		for key, f := range frames {
			rows += len(f)
			if len(f) > weekMaxFrameRows {
				t.Errorf("%s: frame %s has %d rows, more than Grafana accepts (%d)", where, key, len(f), weekMaxFrameRows)
			}
		}
		t.Logf("%s: %d rows in %d frames", where, rows, len(frames))
		if rows == 0 {
			t.Errorf("%s: no data over 7 days:\n%s", where, q)
		}
		if len(frames) > weekMaxSeries {
			t.Errorf("%s: %d series, more than Grafana accepts (%d)", where, len(frames), weekMaxSeries)
		}
		refs, _ := parseFlux(queries[where])
		decisions := slices.Equal(refs.measurements, []string{influx.Decision})
		switch {
		case strings.Contains(where, "annotation"):
			actions := map[string]bool{}
			nothing := 0
			for _, f := range frames {
				for _, row := range f {
					if strings.HasPrefix(row["text"], "none:") || row["action"] == "none" {
						nothing++
					}
					actions[row["action"]] = true
				}
			}
			if nothing > 0 {
				t.Errorf("%s: %d markers of decisions to do nothing", where, nothing)
			}
			if len(actions) != 3 || rows > windows*len(actions) || rows > acted["web"] {
				t.Errorf("%s: %d markers of actions %v; want the 3 actions, at most one per action and window (%d windows), at most the %d decisions that acted",
					where, rows, actions, windows, acted["web"])
			}
		case strings.Contains(where, `"Decisions"`):
			if rows != 500 || len(frames) != 1 {
				t.Errorf("%s: %d rows in %d frames, want the newest 500 (of %d that acted) in one", where, rows, len(frames), acted["web"])
			}
			for _, f := range frames {
				for i, row := range f {
					if row["action"] == "none" || (i > 0 && row["_time"] > f[i-1]["_time"]) {
						t.Errorf("%s: row %d %v: a decision to do nothing, or not newest first", where, i, row)
						break
					}
				}
			}
		case decisions && strings.Contains(where, "panel"):
			// One series per field read: the action tag must not split them.
			if len(frames) != len(refs.fields) {
				t.Errorf("%s: %d series for the %d fields %v (split by a tag?)", where, len(frames), len(refs.fields), refs.fields)
			}
		}
	}
}
