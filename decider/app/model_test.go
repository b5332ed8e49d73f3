package app

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/decider/queueing"
)

func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = MainEnv(args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &obj), "output %q", s)
	require.Equal(t, 1, strings.Count(strings.TrimSpace(s), "\n")+1, "one JSON object on one line")
	return obj
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var baseKeys = []string{"mean_latency_seconds", "mean_queue_length", "mean_wait_seconds", "utilization", "wait_probability"}

func TestModelJSONKeys(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		extra []string
	}{
		{"base", nil, nil},
		{"percentile", []string{"--percentile", "95"}, []string{"latency_seconds_at_percentile"}},
		{"target", []string{"--target", "120ms"}, []string{"min_servers_for_mean_target"}},
		{"both", []string{"--percentile", "95", "--target", "400ms"},
			[]string{"latency_seconds_at_percentile", "min_servers_for_mean_target", "min_servers_for_percentile_target"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12"}, tc.args...)
			code, out, errs := run(t, nil, args...)
			require.Equal(t, 0, code, errs)
			obj := decodeObject(t, out)
			want := append(append([]string{}, baseKeys...), tc.extra...)
			sort.Strings(want)
			require.Equal(t, want, keys(obj))
		})
	}
}

// TestModelMatchesClosedForm runs M/M/1, whose answers are closed forms:
// ρ = λ/μ, C = ρ, L = 1/(μ−λ), p-th percentile −ln(1−p)/(μ−λ).
func TestModelMatchesClosedForm(t *testing.T) {
	for _, tc := range []struct {
		lambda string
		l, mu  float64
	}{{"5", 5, 10}, {"9.5", 9.5, 10}, {"0", 0, 10}} {
		code, out, errs := run(t, nil, "model", "--arrival-rate", tc.lambda, "--service-time", "100ms", "--servers", "1", "--percentile", "90")
		require.Equal(t, 0, code, errs)
		obj := decodeObject(t, out)
		rho := tc.l / tc.mu
		require.InDelta(t, rho, obj["utilization"], 1e-12)
		require.InDelta(t, rho, obj["wait_probability"], 1e-12)
		require.InEpsilon(t, 1/(tc.mu-tc.l), obj["mean_latency_seconds"], 1e-12)
		require.InEpsilon(t, -math.Log(0.1)/(tc.mu-tc.l), obj["latency_seconds_at_percentile"], 1e-9)
	}
}

func TestModelIssueExampleAgreesWithPackage(t *testing.T) {
	code, out, errs := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12",
		"--percentile", "95", "--target", "400ms")
	require.Equal(t, 0, code, errs)
	obj := decodeObject(t, out)
	load := queueing.Load{ArrivalRate: 95, ServiceTime: 0.1}
	m, err := load.At(12)
	require.NoError(t, err)
	p95, err := m.LatencyPercentile(95)
	require.NoError(t, err)
	require.InEpsilon(t, m.MeanLatency, obj["mean_latency_seconds"], 1e-15)
	require.InEpsilon(t, p95, obj["latency_seconds_at_percentile"], 1e-15)
	// The reported minimum meets the target and one fewer does not.
	minMean := int(obj["min_servers_for_mean_target"].(float64))
	minP := int(obj["min_servers_for_percentile_target"].(float64))
	at, err := load.At(minMean)
	require.NoError(t, err)
	require.LessOrEqual(t, at.MeanLatency, 0.4)
	at, err = load.At(minP)
	require.NoError(t, err)
	v, _ := at.LatencyPercentile(95)
	require.LessOrEqual(t, v, 0.4)
	if below, err := load.At(minP - 1); err == nil {
		v, _ := below.LatencyPercentile(95)
		require.Greater(t, v, 0.4)
	}
}

func TestModelConcurrencyAndLayout(t *testing.T) {
	// 3 pods of concurrency 4 pooled is the same queue as 12 servers.
	_, a, _ := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "3", "--concurrency", "4")
	_, b, _ := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12")
	require.JSONEq(t, b, a)
	// Per pod, 12 M/M/1 queues with λ/12 each: L = 1/(μ − λ/12).
	code, out, errs := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12", "--model", "per-pod")
	require.Equal(t, 0, code, errs)
	obj := decodeObject(t, out)
	require.InEpsilon(t, 1/(10-95.0/12), obj["mean_latency_seconds"], 1e-12)
}

func TestModelInfeasibleTargetIsNull(t *testing.T) {
	code, out, errs := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12",
		"--percentile", "95", "--target", "120ms")
	require.Equal(t, 0, code)
	obj := decodeObject(t, out)
	require.Contains(t, obj, "min_servers_for_percentile_target")
	require.Nil(t, obj["min_servers_for_percentile_target"])
	require.NotNil(t, obj["min_servers_for_mean_target"])
	require.Contains(t, errs, "no number of servers meets the p95 latency target")
}

func TestModelText(t *testing.T) {
	code, out, errs := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12",
		"--percentile", "99", "--target", "1s", "--output", "text")
	require.Equal(t, 0, code, errs)
	for _, want := range []string{"utilization", "wait_probability", "mean_latency", "latency_at_p99", "min_servers_for_mean_target", "min_servers_for_p99_target"} {
		require.Contains(t, out, want)
	}
}

func TestModelUnstable(t *testing.T) {
	code, out, errs := run(t, nil, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "9", "--target", "150ms")
	require.Equal(t, ExitUnstable, code)
	require.Empty(t, out)
	require.Contains(t, errs, "unstable")
	require.Contains(t, errs, "at least 10 servers")
}

func TestModelBadInput(t *testing.T) {
	base := map[string]string{"--arrival-rate": "95", "--service-time": "100ms", "--servers": "12"}
	cases := []struct {
		flag, value string // value "" removes the flag
		want        string
	}{
		{"--arrival-rate", "", "--arrival-rate"},
		{"--arrival-rate", "-1", "--arrival-rate"},
		{"--arrival-rate", "NaN", "--arrival-rate"},
		{"--arrival-rate", "Inf", "--arrival-rate"},
		{"--arrival-rate", "fast", "arrival-rate"},
		{"--service-time", "", "--service-time"},
		{"--service-time", "0s", "--service-time"},
		{"--service-time", "-5ms", "--service-time"},
		{"--service-time", "100", "service-time"},
		{"--servers", "", "--servers"},
		{"--servers", "0", "--servers"},
		{"--servers", "20000000", "--servers"},
		{"--percentile", "0", "--percentile"},
		{"--percentile", "100", "--percentile"},
		{"--percentile", "-3", "--percentile"},
		{"--target", "0s", "--target"},
		{"--concurrency", "0", "--concurrency"},
		{"--output", "yaml", "--output"},
		{"--model", "mesh", "--model"},
		{"--service-scv", "-1", "--service-scv"},
		{"--bogus", "1", "bogus"},
	}
	for _, tc := range cases {
		t.Run(tc.flag+"="+tc.value, func(t *testing.T) {
			args := []string{"model"}
			for k, v := range base {
				if k != tc.flag {
					args = append(args, k, v)
				}
			}
			if tc.value != "" {
				args = append(args, tc.flag, tc.value)
			}
			code, out, errs := run(t, nil, args...)
			require.Equal(t, 2, code, errs)
			require.Empty(t, out)
			require.Contains(t, errs, tc.want)
		})
	}
}

func TestModelEnvironment(t *testing.T) {
	env := map[string]string{"QAS_DECIDER_ARRIVAL_RATE": "5", "QAS_DECIDER_SERVICE_TIME": "100ms", "QAS_DECIDER_SERVERS": "1"}
	code, out, errs := run(t, env, "model")
	require.Equal(t, 0, code, errs)
	require.InDelta(t, 0.5, decodeObject(t, out)["utilization"], 1e-12)
	// A flag beats the environment.
	code, out, _ = run(t, env, "model", "--servers", "2")
	require.Equal(t, 0, code)
	require.InDelta(t, 0.25, decodeObject(t, out)["utilization"], 1e-12)
	code, _, errs = run(t, map[string]string{"QAS_DECIDER_ARRIVAL_RATE": "x"}, "model")
	require.Equal(t, 2, code)
	require.Contains(t, errs, "QAS_DECIDER_ARRIVAL_RATE")
}

func TestDispatcher(t *testing.T) {
	code, _, errs := run(t, nil)
	require.Equal(t, 2, code)
	require.Contains(t, errs, "model")
	code, _, errs = run(t, nil, "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, errs, `unknown subcommand "frobnicate"`)
	code, help, _ := run(t, nil, "help")
	require.Equal(t, 0, code)
	require.Contains(t, help, "model")
	code, out, _ := run(t, nil, "model", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "-arrival-rate")
	for name, c := range commands {
		require.NotEmpty(t, c.Summary, name)
		require.NotNil(t, c.Run, name)
		require.Contains(t, help, name+" ", "the command list names every subcommand")
	}
}

// TestBinary builds qas-decider and runs it once as a user would.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qas-decider")
	build := exec.Command("go", "build", "-o", bin, "github.com/qas-dev/qas/decider/cmd/qas-decider")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	out, err := exec.Command(bin, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "12",
		"--percentile", "95", "--target", "400ms").Output()
	require.NoError(t, err)
	obj := decodeObject(t, string(out))
	require.InEpsilon(t, 95.0/120, obj["utilization"], 1e-12)

	cmd := exec.Command(bin, "model", "--arrival-rate", "95", "--service-time", "100ms", "--servers", "0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 2, ee.ExitCode())
	require.Contains(t, stderr.String(), "--servers")

	err = exec.Command(bin, "model", "--arrival-rate", "200", "--service-time", "100ms", "--servers", "12").Run()
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitUnstable, ee.ExitCode())
}
