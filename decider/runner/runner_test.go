package runner

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/qas-dev/qas/internal/cli"
)

func parse(t *testing.T, args []string, env map[string]string) (Options, error) {
	t.Helper()
	var o Options
	fs := o.FlagSet()
	getenv := func(k string) string { return env[k] }
	if err := cli.Parse(fs, EnvPrefix, args, getenv); err != nil {
		return o, err
	}
	return o, o.Complete(getenv, func() (string, error) { return "host-1", nil })
}

func TestOptions(t *testing.T) {
	o, err := parse(t, nil, nil)
	require.NoError(t, err)
	require.Equal(t, "qas-system", o.LeaseNamespace)
	require.Equal(t, "host-1", o.Identity)
	require.Equal(t, 5*time.Second, o.Interval, "every scrape of the collector, as the simulator's qas decides")
	require.Equal(t, 6*time.Hour, o.Window, "the six hours of λ the simulator's qas reads")
	require.Equal(t, 15*time.Second, o.RateWindow)
	require.True(t, o.LeaderElect)
	require.Equal(t, 24*time.Hour, o.HistorySpan, "a day of long λ history for the recurring-burst detector")
	require.Equal(t, time.Minute, o.HistoryStep)
	require.Equal(t, 5, o.Workers, "the HPA's default")
	o.Interval = 15 * time.Second
	require.Equal(t, 5*time.Second, o.ReadDeadline(), "a third of a 15 s interval")
	o.Interval, o.MeasureTimeout = 3*time.Second, 0
	require.Equal(t, time.Second, o.ReadDeadline(), "a short interval gets a short deadline")
	o.MeasureTimeout = 2 * time.Second
	require.Equal(t, 2*time.Second, o.ReadDeadline())
	// A caller that builds Options without the long history (span and step
	// zero) reads none; a span needs a step.
	o.HistorySpan, o.HistoryStep = 0, 0
	require.NoError(t, o.Validate())
	o.HistorySpan = time.Hour
	require.ErrorContains(t, o.Validate(), "history-step")

	o, err = parse(t, nil, map[string]string{"POD_NAMESPACE": "ops", "POD_NAME": "qas-decider-7", "QAS_DECIDER_DRY_RUN": "true"})
	require.NoError(t, err)
	require.Equal(t, "ops", o.LeaseNamespace)
	require.Equal(t, "qas-decider-7", o.Identity)
	require.True(t, o.DryRun)

	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--influx-url", "ftp://x"}, "influx-url"},
		{[]string{"--influx-bucket", ""}, "influx-bucket"},
		{[]string{"--interval", "0s"}, "interval"},
		{[]string{"--window", "4s"}, "window"},
		{[]string{"--rate-window", "-1s"}, "rate-window"},
		{[]string{"--rate-window", "7h"}, "rate-window"},
		{[]string{"--window", "10s"}, "rate-window"},
		{[]string{"--max-pod-data-age", "0s"}, "max-pod-data-age"},
		{[]string{"--history-step", "0s"}, "history-step"},
		{[]string{"--history-step", "1500ms"}, "history-step"},
		{[]string{"--history-span", "-1h"}, "history-span"},
		{[]string{"--history-span", "2m"}, "history-span"},
		{[]string{"--history-span", "2000h", "--history-step", "1s"}, "history-span"},
		{[]string{"--measure-timeout", "-1s"}, "measure-timeout"},
		{[]string{"--measure-timeout", "15s"}, "measure-timeout"},
		{[]string{"--workers", "0"}, "workers"},
		{[]string{"--leader-election-id", ""}, "leader-election-id"},
		{[]string{"--leader-lease-duration", "5s"}, "leader-lease-duration"},
		{[]string{"--leader-retry-period", "0s"}, "leader-renew-deadline"},
		{[]string{"--metrics-listen", "9903"}, "metrics-listen"},
		{[]string{"--front-replicas", "-1"}, "front-replicas"},
		{[]string{"--front-replicas", "101"}, "front-replicas"},
		{[]string{"--front-resources", `{"requests":{"cpu":"lots"}}`}, "front-resources"},
		{[]string{"--front-resources", `{"request":{"cpu":"1"}}`}, "front-resources"},
		{[]string{"--front-node-selector", `["a"]`}, "front-node-selector"},
		{[]string{"--front-tolerations", `[{"key":"a","effect":"NoSchedule"}] x`}, "front-tolerations"},
		{[]string{"--front-image-pull-secrets", "Not_A_Name"}, "front-image-pull-secrets"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			_, err := parse(t, tc.args, nil)
			require.True(t, cli.IsUsage(err), "%v", err)
			require.ErrorContains(t, err, "--"+tc.flag)
		})
	}
	// A positional argument stops Go's flag parsing: it is refused, so that the bad
	// --interval after it cannot go unreported.
	_, err = parse(t, []string{"--dry-run", "false", "--interval", "0s"}, nil)
	require.True(t, cli.IsUsage(err), "%v", err)
	require.ErrorContains(t, err, `unexpected argument "false" (boolean flags take --dry-run=false)`)
	_, err = parse(t, []string{"--version", "--interval", "0s"}, nil)
	require.ErrorIs(t, err, cli.ErrVersion)

	o, err = parse(t, []string{"--front-image=registry.example/qas-proxy:1.2", "--front-replicas=3",
		`--front-resources={"requests":{"cpu":"200m"}}`, "--front-image-pull-secrets=regcred, other",
		`--front-node-selector={"pool":"edge"}`, `--front-tolerations=[{"key":"dedicated","operator":"Exists"}]`}, nil)
	require.NoError(t, err)
	front, err := o.Front()
	require.NoError(t, err)
	require.Equal(t, "registry.example/qas-proxy:1.2", front.Image)
	require.Equal(t, int32(3), front.Replicas)
	require.Equal(t, "200m", front.Resources.Requests.Cpu().String())
	require.Empty(t, front.Resources.Limits, "the JSON replaces the default resources")
	require.Equal(t, []string{"regcred", "other"}, front.ImagePullSecrets)
	require.Equal(t, map[string]string{"pool": "edge"}, front.NodeSelector)
	require.Equal(t, "dedicated", front.Tolerations[0].Key)

	var o2 Options
	require.NoError(t, cli.Parse(o2.FlagSet(), EnvPrefix, nil, func(string) string { return "" }))
	err = o2.Complete(func(string) string { return "" }, func() (string, error) { return "", errors.New("no uts") })
	require.ErrorContains(t, err, "--identity")
}
