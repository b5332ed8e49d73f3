package runner

import (
	"encoding/json"
	"errors"
	"flag"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/measurement"
	"github.com/qas-dev/qas/decider/store"
	"github.com/qas-dev/qas/internal/cli"
	"github.com/qas-dev/qas/internal/influx"
)

// EnvPrefix is the prefix of the environment variables that override run's flags
// (QAS_DECIDER_INFLUX_URL overrides --influx-url).
const EnvPrefix = "QAS_DECIDER"

// Options are `qas-decider run`'s settings.
type Options struct {
	Kubeconfig                                string
	Influx                                    influx.Options
	Interval, Window, RateWindow, MaxPodAge   time.Duration
	HistorySpan, HistoryStep                  time.Duration
	MeasureTimeout                            time.Duration
	Workers                                   int
	DryRun                                    bool
	LeaderElect                               bool
	LeaseNamespace, LeaseName, Identity       string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	MetricsListen                             string
	// Front* configure the front the decider runs for a workload with routing pooled.
	FrontImage, FrontResources, FrontImagePullSecrets string
	FrontReplicas                                     int
	FrontTolerations, FrontNodeSelector               string
	Log                                               cli.LogOptions
}

// FlagSet registers the options' flags.
func (o *Options) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("qas-decider run", flag.ContinueOnError)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty = in-cluster)")
	o.Influx.Register(fs, "InfluxDB base URL (where qas-collector writes)")
	fs.DurationVar(&o.Interval, "interval", measurement.DefaultInterval, "decision cycle period: every scrape of the collector (its --interval), as the simulator's qas decides; a longer one sees a burst later")
	fs.DurationVar(&o.Window, "window", measurement.DefaultWindow, "how much arrival-rate history each decision reads: the forecast's input and the jumps the scale-down's margin and the jump floor price (the simulator's qas reads the default)")
	fs.DurationVar(&o.RateWindow, "rate-window", measurement.DefaultRateWindow, "the long window λ is read over: the collector's points (one per scrape) are merged into windows of this length, the newest point alone being the fast path's short window; at least two scrapes, so the count dispersion can be measured (0: the default)")
	fs.DurationVar(&o.HistorySpan, "history-span", store.DefaultHistorySpan, "how much long λ history (step means) the recurring-burst detector reads; 0 turns it off (a daily period needs more than 2 days)")
	fs.DurationVar(&o.HistoryStep, "history-step", store.DefaultHistoryStep, "the long λ history's step: λ's mean per step, a whole number of seconds")
	fs.DurationVar(&o.MaxPodAge, "max-pod-data-age", time.Minute, "a Ready pod without a measurement this recent counts as missing data (no scale-down)")
	fs.DurationVar(&o.MeasureTimeout, "measure-timeout", 0, "deadline of each read of a workload's measurements, shorter than --interval (0: a third of --interval); a workload whose data is late holds this cycle")
	fs.IntVar(&o.Workers, "workers", controller.DefaultWorkers, "QueueAutoscalers reconciled at once in a cycle")
	fs.BoolVar(&o.DryRun, "dry-run", false, "decide and record every QueueAutoscaler, change nothing")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "act only while holding the leader Lease (run several replicas)")
	fs.StringVar(&o.LeaseNamespace, "leader-election-namespace", "", "namespace of the Lease (default $POD_NAMESPACE, else qas-system)")
	fs.StringVar(&o.LeaseName, "leader-election-id", "qas-decider", "name of the Lease")
	fs.StringVar(&o.Identity, "identity", "", "this replica's name in the Lease (default $POD_NAME, else the hostname)")
	fs.DurationVar(&o.LeaseDuration, "leader-lease-duration", 15*time.Second, "how long a Lease holds without renewal")
	fs.DurationVar(&o.RenewDeadline, "leader-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops acting")
	fs.DurationVar(&o.RetryPeriod, "leader-retry-period", 2*time.Second, "pause between tries to acquire or renew")
	fs.StringVar(&o.MetricsListen, "metrics-listen", ":9903", "address for /metrics, /healthz and /readyz")
	fs.StringVar(&o.FrontImage, "front-image", controller.DefaultFrontImage, "qas-proxy image of the front the decider runs for each workload with routing: pooled (the webhook's --proxy-image)")
	fs.IntVar(&o.FrontReplicas, "front-replicas", 2, "replicas of each pooled workload's front")
	fs.StringVar(&o.FrontResources, "front-resources", "", `resources of the front container as JSON, e.g. {"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"memory":"256Mi"}} (empty: that default)`)
	fs.StringVar(&o.FrontImagePullSecrets, "front-image-pull-secrets", "", "comma-separated Secrets the fronts' pods pull the image with (each must exist in the workload's namespace)")
	fs.StringVar(&o.FrontNodeSelector, "front-node-selector", "", `nodeSelector of the fronts' pods as JSON, e.g. {"kubernetes.io/os":"linux"}`)
	fs.StringVar(&o.FrontTolerations, "front-tolerations", "", `tolerations of the fronts' pods as a JSON list, e.g. [{"key":"dedicated","operator":"Exists"}]`)
	o.Log.Register(fs)
	return fs
}

// Complete fills the defaults that come from the pod (downward API) or the host, then
// validates. getenv and hostname are injected for tests.
func (o *Options) Complete(getenv func(string) string, hostname func() (string, error)) error {
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = getenv("POD_NAMESPACE")
		if o.LeaseNamespace == "" {
			o.LeaseNamespace = "qas-system"
		}
	}
	if o.Identity == "" {
		o.Identity = getenv("POD_NAME")
		if o.Identity == "" {
			h, err := hostname()
			if err != nil || h == "" {
				return cli.Usagef("identity", "not set, no $POD_NAME and no hostname (%v)", err)
			}
			o.Identity = h
		}
	}
	return o.Validate()
}

// ReadDeadline is the deadline of each read of measurements: --measure-timeout, or
// a third of --interval when it is 0.
func (o *Options) ReadDeadline() time.Duration {
	if o.MeasureTimeout > 0 {
		return o.MeasureTimeout
	}
	return o.Interval / 3
}

// Validate checks the options; each error names its flag.
func (o *Options) Validate() error {
	if err := o.Influx.Validate(); err != nil {
		return err
	}
	switch {
	case o.Interval <= 0:
		return cli.Usagef("interval", "%s is not positive", o.Interval)
	case o.Window < o.Interval:
		return cli.Usagef("window", "%s is shorter than --interval (%s)", o.Window, o.Interval)
	case o.RateWindow < 0 || o.RateWindow > o.Window:
		// 0 is the default's (a caller that builds Options without it).
		return cli.Usagef("rate-window", "%s must be at most --window (%s) and not negative (0: %s)", o.RateWindow, o.Window, measurement.DefaultRateWindow)
	case o.MeasureTimeout < 0 || o.MeasureTimeout >= o.Interval:
		return cli.Usagef("measure-timeout", "%s must be shorter than --interval (%s), so that a cycle ends in time, and not negative (0: a third of --interval)", o.MeasureTimeout, o.Interval)
	case o.Workers < 1:
		return cli.Usagef("workers", "%d: at least 1 is needed", o.Workers)
	case o.HistoryStep < 0 || o.HistoryStep%time.Second != 0 || (o.HistorySpan != 0 && o.HistoryStep == 0):
		// A zero step is only the zero Options' (a caller that reads no long
		// history); with a span it must be a positive whole number of seconds.
		return cli.Usagef("history-step", "%s is not a positive whole number of seconds", o.HistoryStep)
	case o.HistorySpan < 0 || (o.HistorySpan > 0 && o.HistorySpan < 3*o.HistoryStep):
		return cli.Usagef("history-span", "%s must be 0 (off) or at least three --history-step (%s)", o.HistorySpan, o.HistoryStep)
	case o.HistorySpan > 0 && o.HistorySpan/o.HistoryStep > store.MaxHistorySamples:
		return cli.Usagef("history-span", "%s over --history-step %s is more than %d samples per workload", o.HistorySpan, o.HistoryStep, store.MaxHistorySamples)
	case o.MaxPodAge <= 0:
		return cli.Usagef("max-pod-data-age", "%s is not positive", o.MaxPodAge)
	case o.LeaseName == "":
		return cli.Usagef("leader-election-id", "must not be empty")
	case o.LeaseDuration <= o.RenewDeadline:
		return cli.Usagef("leader-lease-duration", "%s must be longer than --leader-renew-deadline (%s)", o.LeaseDuration, o.RenewDeadline)
	case o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0:
		return cli.Usagef("leader-renew-deadline", "%s must be longer than --leader-retry-period (%s), which must be positive", o.RenewDeadline, o.RetryPeriod)
	}
	if _, _, err := net.SplitHostPort(o.MetricsListen); err != nil {
		return cli.Usagef("metrics-listen", "%q is not host:port: %v", o.MetricsListen, err)
	}
	if _, err := o.Front(); err != nil {
		return err
	}
	return nil
}

// Front is the front configuration the flags give; errors name the flag.
func (o *Options) Front() (controller.FrontConfig, error) {
	// Zero values (Options built in code) take the defaults.
	f := controller.DefaultFrontConfig()
	if o.FrontImage != "" {
		f.Image = o.FrontImage
	}
	if o.FrontReplicas < 0 || o.FrontReplicas > 100 {
		return f, cli.Usagef("front-replicas", "%d: want 1 to 100 (0: the default, 2)", o.FrontReplicas)
	}
	if o.FrontReplicas > 0 {
		f.Replicas = int32(o.FrontReplicas)
	}
	if strings.TrimSpace(o.FrontResources) != "" {
		f.Resources = corev1.ResourceRequirements{}
		if err := strictJSON(o.FrontResources, &f.Resources); err != nil {
			return f, cli.Usagef("front-resources", "not a container's resources in JSON: %v", err)
		}
	}
	if strings.TrimSpace(o.FrontNodeSelector) != "" {
		if err := strictJSON(o.FrontNodeSelector, &f.NodeSelector); err != nil {
			return f, cli.Usagef("front-node-selector", "not a JSON object of strings: %v", err)
		}
	}
	if strings.TrimSpace(o.FrontTolerations) != "" {
		if err := strictJSON(o.FrontTolerations, &f.Tolerations); err != nil {
			return f, cli.Usagef("front-tolerations", "not a JSON list of tolerations: %v", err)
		}
	}
	for _, s := range strings.Split(o.FrontImagePullSecrets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			f.ImagePullSecrets = append(f.ImagePullSecrets, s)
		}
	}
	if err := f.Validate(); err != nil {
		flag := "front-image"
		if strings.Contains(err.Error(), "pull secret") {
			flag = "front-image-pull-secrets"
		}
		return f, cli.Usagef(flag, "%v", err)
	}
	return f, nil
}

// strictJSON decodes s into v refusing unknown fields and trailing data.
func strictJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
