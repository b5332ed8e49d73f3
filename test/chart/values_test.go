package chart

import (
	"cmp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
)

// TestBadValuesRefused: each value here is one that `helm install` used to accept and
// that then fails where nobody is watching: the binary exits at start-up (the pods
// crash-loop; for the webhook, with failurePolicy Ignore, every pod is admitted
// without the sidecar), the apiserver refuses the pods the Deployment or the webhook
// makes, or cert-manager refuses the Certificate. The chart must refuse it at `helm
// template` time with a message naming the value. Where a binary is the one that
// would fail, the test also shows it does: it parses the default render's command
// line of that container with the flag as the chart would have rendered it appended
// (Go's flag parser keeps the last value), by the binary's own code.
func TestBadValuesRefused(t *testing.T) {
	h := newHelm(t)
	defaults := h.template(t, "")
	cases := []struct {
		values string
		want   []string // substrings of helm's error, naming the value
		// container of the default render whose flags carry the value ("decider",
		// "collector" or "webhook"; the webhook's check includes the sidecar it
		// injects), the flags the chart would render, and a substring of the binary's
		// error. Empty: not a binary's flag (the comment says who refuses it).
		container string
		flags     []string
		binaryErr string
	}{
		// decider run
		{values: "decider: {interval: 0s}", want: []string{"/decider/interval", "0s"},
			container: "decider", flags: []string{"--interval=0s"}, binaryErr: "invalid --interval: 0s is not positive"},
		{values: "decider: {interval: 15s, window: 10s}", want: []string{"decider.window (10s) must be at least decider.interval (15s)"},
			container: "decider", flags: []string{"--interval=15s", "--window=10s"}, binaryErr: "invalid --window: 10s is shorter than --interval (15s)"},
		{values: "decider: {window: 10s}", want: []string{"decider.rateWindow (15s) must be at most decider.window (10s)"},
			container: "decider", flags: []string{"--window=10s"}, binaryErr: "invalid --rate-window: 15s must be at most --window (10s)"},
		{values: "decider: {rateWindow: -1s}", want: []string{"/decider/rateWindow", "-1s"},
			container: "decider", flags: []string{"--rate-window=-1s"}, binaryErr: "invalid --rate-window"},
		{values: "decider: {interval: 1m, window: 59.999s}", want: []string{"decider.window (59.999s) must be at least decider.interval (1m)"},
			container: "decider", flags: []string{"--interval=1m", "--window=59.999s"}, binaryErr: "invalid --window"},
		{values: "decider: {interval: 2562048h, window: 2562048h}", want: []string{"decider.interval (2562048h) is out of range"},
			container: "decider", flags: []string{"--interval=2562048h"}, binaryErr: "interval"},
		{values: "decider: {window: '15'}", want: []string{"/decider/window", "'15'"},
			container: "decider", flags: []string{"--window=15"}, binaryErr: "window"},
		{values: "log: {level: trace}", want: []string{"/log/level", "must be one of"},
			container: "decider", flags: []string{"--log-level=trace"}, binaryErr: "invalid --log-level"},
		{values: "log: {format: text}", want: []string{"/log/format", "must be one of"},
			container: "collector", flags: []string{"--log-format=text"}, binaryErr: "invalid --log-format"},
		// extraArgs: one flag an item; a bare word would be a positional argument,
		// which every binary refuses (and a value split from its flag is one).
		{values: "decider: {extraArgs: [--dry-run, 'false']}", want: []string{"/decider/extraArgs/1", "false"},
			container: "decider", flags: []string{"--dry-run", "false"}, binaryErr: `unexpected argument "false"`},
		{values: "collector: {extraArgs: ['--interval 5s']}", want: []string{"/collector/extraArgs/0"},
			container: "collector", flags: []string{"--interval 5s"}, binaryErr: "flag provided but not defined: -interval 5s"},
		{values: "webhook: {extraArgs: [proxy-cpu]}", want: []string{"/webhook/extraArgs/0", "proxy-cpu"},
			container: "webhook", flags: []string{"proxy-cpu"}, binaryErr: `unexpected argument "proxy-cpu"`},
		// The Lease is the chart's own object: the apiserver refuses the name at install.
		{values: "decider: {leaderElection: {id: a..b}}", want: []string{"/decider/leaderElection/id", "a..b"}},

		// qas-collector
		{values: "collector: {interval: 1s}", want: []string{"collector.scrapeTimeout (2s) must be at most collector.interval (1s)"},
			container: "collector", flags: []string{"--interval=1s"}, binaryErr: "invalid --scrape-timeout: 2s must be positive and at most --interval (1s)"},
		{values: "collector: {scrapeTimeout: 0ms}", want: []string{"/collector/scrapeTimeout", "0ms"},
			container: "collector", flags: []string{"--scrape-timeout=0ms"}, binaryErr: "invalid --scrape-timeout"},
		{values: "collector: {interval: 0s, scrapeTimeout: 0s}", want: []string{"/collector/interval", "/collector/scrapeTimeout"},
			container: "collector", flags: []string{"--interval=0s", "--scrape-timeout=0s"}, binaryErr: "invalid --interval: 0s is not positive"},
		{values: "collector: {interval: 1h, scrapeTimeout: 1.5ns}", want: []string{"/collector/scrapeTimeout", "1.5ns"}},
		{values: "collector: {bufferPoints: 100}", want: []string{"/collector/bufferPoints", "100"},
			container: "collector", flags: []string{"--buffer-points=100"}, binaryErr: "invalid --buffer-points: 100 is less than one batch (5000)"},
		// The informer lists pods in a namespace that cannot exist: nothing is ever found.
		{values: "collector: {namespace: My_Apps}", want: []string{"/collector/namespace", "My_Apps"}},

		// InfluxDB flags of the decider and collector
		{values: "influxdb: {mode: external, external: {url: 'http:///influx'}}", want: []string{"/influxdb/external/url", "http:///influx"},
			container: "collector", flags: []string{"--influx-url=http:///influx"}, binaryErr: "invalid --influx-url"},
		{values: "influxdb: {mode: external, external: {url: 'http://influx:port'}}", want: []string{"/influxdb/external/url", "http://influx:port"},
			container: "decider", flags: []string{"--influx-url=http://influx:port"}, binaryErr: "invalid --influx-url"},
		{values: "influxdb: {mode: external, external: {url: 'http://in flux:8086'}}", want: []string{"/influxdb/external/url"},
			container: "decider", flags: []string{"--influx-url=http://in flux:8086"}, binaryErr: "invalid --influx-url"},
		{values: "influxdb: {mode: external, bucket: '', external: {url: 'http://influx:8086'}}", want: []string{"/influxdb/bucket"},
			container: "collector", flags: []string{"--influx-bucket="}, binaryErr: "invalid --influx-bucket: must not be empty"},
		// A token Secret that cannot exist: the apiserver refuses the Deployments.
		{values: "influxdb: {mode: external, external: {url: 'http://influx:8086', tokenSecret: {name: Influx_Auth}}}", want: []string{"/influxdb/external/tokenSecret/name"}},
		{values: "influxdb: {mode: external, external: {url: 'http://influx:8086', tokenSecret: {name: auth, key: '..token'}}}", want: []string{"/influxdb/external/tokenSecret/key"}},

		// qas-decider webhook and the sidecar it injects
		{values: "webhook: {proxy: {resources: {requests: {cpu: lots}}}}", want: []string{"/webhook/proxy/resources/requests/cpu", "lots"},
			container: "webhook", flags: []string{`--proxy-resources={"requests":{"cpu":"lots"}}`}, binaryErr: "invalid --proxy-resources"},
		{values: "webhook: {proxy: {resources: {limits: {memory: 64MB}}}}", want: []string{"/webhook/proxy/resources/limits/memory", "64MB"},
			container: "webhook", flags: []string{`--proxy-resources={"limits":{"memory":"64MB"}}`}, binaryErr: "invalid --proxy-resources"},
		{values: "webhook: {proxy: {resources: {requests: {cpu: '-1'}}}}", want: []string{"/webhook/proxy/resources/requests/cpu", "-1"}},
		// The webhook accepts these and injects them; the apiserver then refuses every
		// pod that opted in (a request above its limit, a resource it does not know, a
		// claim on nothing).
		{values: "webhook: {proxy: {resources: {limits: {cpu: 10m}}}}", want: []string{"webhook.proxy.resources.requests.cpu (50m) must not exceed webhook.proxy.resources.limits.cpu (10m)"},
			container: "webhook", flags: []string{`--proxy-resources={"requests":{"cpu":"50m"},"limits":{"cpu":"10m"}}`}, binaryErr: "injected sidecar: requests.cpu 50m exceeds limits.cpu 10m"},
		{values: "webhook: {proxy: {resources: {requests: {memory: 1Gi}, limits: {memory: 1000Mi}}}}", want: []string{"webhook.proxy.resources.requests.memory (1Gi) must not exceed webhook.proxy.resources.limits.memory (1000Mi)"},
			container: "webhook", flags: []string{`--proxy-resources={"requests":{"memory":"1Gi"},"limits":{"memory":"1000Mi"}}`}, binaryErr: "injected sidecar: requests.memory"},
		{values: "webhook: {proxy: {resources: {requests: {gpu: 1}}}}", want: []string{"/webhook/proxy/resources/requests", "gpu"}},
		{values: "webhook: {proxy: {resources: {claims: [{name: gpu}]}}}", want: []string{"/webhook/proxy/resources", "claims"}},
		{values: "webhook: {proxy: {imagePullSecrets: [{name: a..b}]}}", want: []string{"/webhook/proxy/imagePullSecrets/0/name", "a..b"},
			container: "webhook", flags: []string{"--proxy-image-pull-secrets=a..b"}, binaryErr: "invalid --proxy-image-pull-secrets"},
		{values: "webhook: {proxy: {adminPort: 0}}", want: []string{"/webhook/proxy/adminPort"},
			container: "webhook", flags: []string{"--admin-port=0"}, binaryErr: "invalid --admin-port"},
		// The apiserver refuses an image with surrounding spaces in every injected pod.
		{values: "webhook: {proxy: {image: {tag: '0.1.0 '}}}", want: []string{"/webhook/proxy/image/tag"}},
		// cert-manager's admission webhook refuses the Certificate.
		{values: "webhook: {certManager: {enabled: true, renewBefore: 8760h}}", want: []string{"webhook.certManager.renewBefore (8760h) must be shorter than webhook.certManager.duration (8760h)"}},
		{values: "webhook: {certManager: {enabled: true, duration: 30m, renewBefore: 10m}}", want: []string{"webhook.certManager.duration (30m) must be at least 1h"}},
		{values: "webhook: {certManager: {enabled: true, renewBefore: 4m59s}}", want: []string{"webhook.certManager.renewBefore (4m59s) must be at least 5m"}},
		{values: "webhook: {certManager: {enabled: true, duration: 0h}}", want: []string{"/webhook/certManager/duration"}},
		{values: "webhook: {certManager: {enabled: true, duration: null, renewBefore: 2160h}}", want: []string{"webhook.certManager.renewBefore (2160h) must be shorter than webhook.certManager.duration (2160h, cert-manager's default)"}},

		// The chart's own containers: the apiserver refuses the pods.
		{values: "decider: {resources: {limits: {memory: 32Mi}}}", want: []string{"decider.resources.requests.memory (64Mi) must not exceed decider.resources.limits.memory (32Mi)"}},
		{values: "collector: {resources: {requests: {cpu: 2}, limits: {cpu: 1500m}}}", want: []string{"collector.resources.requests.cpu (2) must not exceed collector.resources.limits.cpu (1500m)"}},
		{values: "webhook: {resources: {requests: {ephemeral-storage: 2Gi}, limits: {ephemeral-storage: 1G}}}", want: []string{"webhook.resources.requests.ephemeral-storage (2Gi) must not exceed"}},
		{values: "influxdb: {internal: {resources: {limits: {memory: 128Mi}}}}", want: []string{"influxdb.internal.resources.requests.memory (256Mi) must not exceed influxdb.internal.resources.limits.memory (128Mi)"}},
		{values: "decider: {resources: {requests: {memory: 64K}}}", want: []string{"/decider/resources/requests/memory", "64K"}},

		// The in-cluster InfluxDB: the StatefulSet's volume, and the database its
		// image's init script creates with the name unquoted (the container exits on
		// its first start; TestInfluxQLKeywords checks the names with a real InfluxDB).
		{values: "influxdb: {internal: {persistence: {size: 0Gi}}}", want: []string{"influxdb.internal.persistence.size (0Gi) must be positive"}},
		{values: "influxdb: {internal: {persistence: {size: 8K}}}", want: []string{"/influxdb/internal/persistence/size", "8K"}},
		{values: "influxdb: {bucket: select/autogen, internal: {database: select}}", want: []string{"influxdb.internal.database (select) is an InfluxQL keyword"}},
		{values: "influxdb: {bucket: my-db/autogen, internal: {database: my-db}}", want: []string{"/influxdb/internal/database", "my-db"}},

		// Names every resource carries: the apiserver refuses them at install.
		{values: "fullnameOverride: 1qas", want: []string{"/fullnameOverride"}},
		{values: "nameOverride: QAS", want: []string{"/nameOverride"}},
	}
	for _, tc := range cases {
		t.Run(tc.values, func(t *testing.T) {
			_, err := h.run("template", "rel", chartDir(t), "--namespace", "qas-system", "-f", valuesFile(t, tc.values))
			if err == nil {
				t.Fatalf("values %q were accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
			if tc.container == "" {
				return
			}
			d := convert[appsv1.Deployment](t, defaults.find("Deployment", "rel-qas-"+tc.container))
			ct := container(t, d, tc.container)
			if err := checkContainer(ct, d.Namespace, &binaryFlags{}); err != nil {
				t.Fatalf("the default render's %s fails already: %v", tc.container, err)
			}
			ct.Args = append(append([]string{}, ct.Args...), tc.flags...)
			err = checkContainer(ct, d.Namespace, &binaryFlags{})
			if err == nil || !strings.Contains(err.Error(), tc.binaryErr) {
				t.Errorf("%s with %q: %v, want an error with %q", tc.container, tc.flags, err, tc.binaryErr)
			}
		})
	}
}

// TestGoodValuesPassBinaries renders the chart with values away from the defaults,
// at the edges the chart's rules allow, and in the notations Kubernetes and Go accept,
// and checks that every binary's own flag parsing and validation accepts what it gets
// (the sidecar the webhook injects included), that the values arrived, and that what
// others validate passes too: requests within limits, cert-manager's durations.
func TestGoodValuesPassBinaries(t *testing.T) {
	h := newHelm(t)
	cases := []struct {
		name, values string
		check        func(t *testing.T, got binaryFlags, r rendered)
	}{{
		name:   "window equal to the interval",
		values: "decider: {interval: 1m, window: 1m}",
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			if got.Decider.Interval != time.Minute || got.Decider.Window != time.Minute {
				t.Errorf("decider interval %v window %v, want 1m both", got.Decider.Interval, got.Decider.Window)
			}
		},
	}, {
		name:   "fractional durations",
		values: "decider: {interval: 1.5s, window: 0.25h, dryRun: true}\ncollector: {interval: 1m, scrapeTimeout: 2.5s}",
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			if got.Decider.Interval != 1500*time.Millisecond || got.Decider.Window != 15*time.Minute || !got.Decider.DryRun {
				t.Errorf("decider %+v", got.Decider)
			}
			if got.Collector.Interval != time.Minute || got.Collector.ScrapeTimeout != 2500*time.Millisecond {
				t.Errorf("collector interval %v timeout %v", got.Collector.Interval, got.Collector.ScrapeTimeout)
			}
		},
	}, {
		name:   "a large buffer",
		values: "collector: {bufferPoints: 2000000}",
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			if got.Collector.BufferPoints != 2_000_000 {
				t.Errorf("collector buffer %d points, want 2000000 (not 2e+06)", got.Collector.BufferPoints)
			}
		},
	}, {
		name:   "scrape timeout equal to the interval",
		values: "collector: {interval: 2s, scrapeTimeout: 2000ms, namespace: apps, cpu: false}",
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			c := got.Collector
			if c.Interval != 2*time.Second || c.ScrapeTimeout != c.Interval || c.Namespace != "apps" || c.CPU {
				t.Errorf("collector %+v", c)
			}
		},
	}, {
		name: "sidecar resources in other notations, requests equal to limits",
		values: `
webhook:
  port: 9443
  proxy:
    adminPort: 9999
    resources:
      requests: {cpu: 0.25, memory: 1073741824, ephemeral-storage: 1G}
      limits: {cpu: "1", memory: 1Gi, ephemeral-storage: 1Gi}
    imagePullSecrets: [{name: my.registry-cred}]`,
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			res := got.Sidecar.Resources
			if res.Requests.Cpu().Cmp(resource.MustParse("250m")) != 0 || res.Requests.Memory().Cmp(*res.Limits.Memory()) != 0 ||
				res.Requests.StorageEphemeral().Cmp(resource.MustParse("1G")) != 0 {
				t.Errorf("sidecar resources %+v", res)
			}
			if got.SidecarFlags.AdminListen != ":9999" || got.Webhook.Listen != ":9443" || len(got.Injected.ImagePullSecrets) != 1 {
				t.Errorf("sidecar admin %q, webhook listen %q, pull secrets %v", got.SidecarFlags.AdminListen, got.Webhook.Listen, got.Injected.ImagePullSecrets)
			}
		},
	}, {
		name:   "cert-manager at its limits",
		values: "webhook: {certManager: {enabled: true, duration: 1h, renewBefore: 5m}}",
		check: func(t *testing.T, got binaryFlags, r rendered) {
			cert := r.find("Certificate", "rel-qas-webhook")
			d, _, _ := unstructured.NestedString(cert.Object, "spec", "duration")
			rb, _, _ := unstructured.NestedString(cert.Object, "spec", "renewBefore")
			if d != "1h" || rb != "5m" || got.Webhook.CertDir == "" {
				t.Errorf("certificate duration %q renewBefore %q, webhook cert dir %q", d, rb, got.Webhook.CertDir)
			}
		},
	}, {
		name:   "cert-manager's defaults",
		values: "webhook: {certManager: {enabled: true, duration: null, renewBefore: null}}",
		check: func(t *testing.T, _ binaryFlags, r rendered) {
			spec, _, _ := unstructured.NestedMap(r.find("Certificate", "rel-qas-webhook").Object, "spec")
			if _, ok := spec["duration"]; ok {
				t.Errorf("certificate spec %v: duration set", spec)
			}
			if _, ok := spec["renewBefore"]; ok {
				t.Errorf("certificate spec %v: renewBefore set", spec)
			}
		},
	}, {
		name: "external InfluxDB with text YAML would misread",
		values: `
influxdb:
  mode: external
  bucket: "metrics/rp #1"
  org: "my org: #1"
  external:
    url: "https://user:pw@influx.example.com:8086/prefix"
    tokenSecret: {name: influx.auth, key: api_token}`,
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			for name, in := range map[string]influx.Options{
				"decider": got.Decider.Influx, "collector": got.Collector.Influx,
			} {
				if in.URL != "https://user:pw@influx.example.com:8086/prefix" || in.Bucket != "metrics/rp #1" || in.Org != "my org: #1" || in.Token != "token-from-influx.auth" {
					t.Errorf("%s influx options %+v", name, in)
				}
			}
		},
	}, {
		name:   "internal InfluxDB with another database, port and volume",
		values: "influxdb: {bucket: _metrics/autogen, internal: {database: _metrics, port: 8087, persistence: {size: 1.5Gi}, resources: {requests: {memory: 2Gi}, limits: {memory: '2147483648'}}}}",
		check: func(t *testing.T, got binaryFlags, r rendered) {
			if got.Decider.Influx.URL != "http://rel-qas-influxdb.qas-system.svc:8087" || got.Collector.Influx.Bucket != "_metrics/autogen" {
				t.Errorf("decider influx %+v, collector %+v", got.Decider.Influx, got.Collector.Influx)
			}
			sts := convert[appsv1.StatefulSet](t, r.find("StatefulSet", "rel-qas-influxdb"))
			if err := requestsWithinLimits(sts.Spec.Template.Spec.Containers[0].Resources); err != nil {
				t.Error(err)
			}
			if size := sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; size.Cmp(resource.MustParse("1536Mi")) != 0 {
				t.Errorf("volume size %s", size.String())
			}
		},
	}, {
		name:   "logging, one decider without leader election, names",
		values: "log: {format: console, level: debug}\ndecider: {replicas: 1, leaderElection: {enabled: false, id: my.lease}}\nfullnameOverride: qas-prod",
		check: func(t *testing.T, got binaryFlags, _ rendered) {
			o := got.Decider
			if o.LeaderElect || o.LeaseName != "my.lease" || o.Log.Format != "console" || got.Collector.Log.Level != "debug" || got.Webhook.SecretName != "qas-prod-webhook-tls" {
				t.Errorf("decider %+v, collector log %+v, webhook secret %q", o, got.Collector.Log, got.Webhook.SecretName)
			}
		},
	}, {
		name:   "chart resources in other notations",
		values: "decider: {resources: {requests: {cpu: 2, memory: 0.5Gi}, limits: {cpu: 2, memory: 512Mi}}}\ncollector: {resources: {requests: {cpu: 1500m, memory: 1e8}, limits: {cpu: 1.5, memory: 100M}}}",
		check: func(t *testing.T, got binaryFlags, r rendered) {
			d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
			if res := d.Spec.Template.Spec.Containers[0].Resources; res.Requests.Memory().Cmp(*res.Limits.Memory()) != 0 {
				t.Errorf("decider resources %+v", res)
			}
		},
	}, {
		name:   "resources removed",
		values: "decider: {resources: null}\nwebhook: {proxy: {resources: {limits: null}}}",
		check: func(t *testing.T, got binaryFlags, r rendered) {
			d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
			if res := d.Spec.Template.Spec.Containers[0].Resources; len(res.Requests)+len(res.Limits) != 0 {
				t.Errorf("decider resources %+v, want none", res)
			}
			if res := got.Sidecar.Resources; len(res.Limits) != 0 || res.Requests.Cpu().IsZero() {
				t.Errorf("sidecar resources %+v, want the default requests only", res)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.template(t, tc.values)
			got := checkRendered(t, r)
			if got.Decider == nil || got.Collector == nil || got.Webhook == nil || got.SidecarFlags == nil {
				t.Fatalf("not every binary was checked: %+v", got)
			}
			// cert-manager's rules (internal/apis/certmanager/validation.ValidateDuration;
			// an unset duration is 2160h, an unset renewBefore is not checked).
			if cert := r.find("Certificate", "rel-qas-webhook"); cert != nil {
				ds, _, _ := unstructured.NestedString(cert.Object, "spec", "duration")
				rbs, hasRB, _ := unstructured.NestedString(cert.Object, "spec", "renewBefore")
				d, err := time.ParseDuration(cmp.Or(ds, "2160h"))
				if err != nil || d < time.Hour {
					t.Errorf("cert-manager refuses duration %q: %v", ds, err)
				}
				if rb, err := time.ParseDuration(rbs); hasRB && (err != nil || rb < 5*time.Minute || rb >= d) {
					t.Errorf("cert-manager refuses renewBefore %q with duration %q: %v", rbs, ds, err)
				}
			}
			tc.check(t, got, r)
		})
	}
}

// TestInfluxQLKeywords checks the chart's list of InfluxQL keywords against a real
// InfluxDB 1.8: each is refused as the unquoted database name the image's init script
// uses (CREATE DATABASE <name>), in any case, and names the schema admits that are not
// keywords are accepted.
func TestInfluxQLKeywords(t *testing.T) {
	_, _, list := probeHelpers(t, newHelm(t), nil, nil)
	keywords := strings.Fields(list)
	if len(keywords) < 50 {
		t.Fatalf("qas.influxqlKeywords has %d words: %q", len(keywords), list)
	}
	s := influxtest.StartWith(t, influxtest.Options{Empty: true})
	for _, kw := range keywords {
		for _, name := range []string{kw, strings.ToUpper(kw)} {
			if err := s.Query("CREATE DATABASE " + name); err == nil {
				t.Errorf("InfluxDB created database %s: not a keyword", name)
			}
		}
	}
	p := loadSchemaPatterns(t)
	for _, kw := range keywords {
		if !p.database.MatchString(kw) {
			t.Errorf("keyword %q: the schema refuses it already, the list need not hold it", kw)
		}
	}
	for _, name := range []string{"qas", "_metrics", "Qas_2", "selects", "my_select", "x"} {
		if !p.database.MatchString(name) {
			t.Errorf("the schema refuses database %q", name)
		}
		if err := s.Query("CREATE DATABASE " + name); err != nil {
			t.Errorf("database %s: %v", name, err)
		}
	}
}
