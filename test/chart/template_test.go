package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	collectorapp "github.com/qas-dev/qas/collector/app"
	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/decider/runner"
)

// convert turns a rendered object into its typed form.
func convert[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	if o == nil {
		t.Fatalf("object of type %T not rendered", *new(T))
	}
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &v); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return &v
}

func container(t testing.TB, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %q", d.Name, name)
	return corev1.Container{}
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// hardened checks the security context every QAS container must have.
func hardened(t *testing.T, d *appsv1.Deployment, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	pod := d.Spec.Template.Spec.SecurityContext
	switch {
	case sc == nil || pod == nil:
		t.Errorf("%s/%s: no security context", d.Name, c.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s/%s: root filesystem is writable", d.Name, c.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s/%s: privilege escalation allowed", d.Name, c.Name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Errorf("%s/%s: capabilities not dropped: %+v", d.Name, c.Name, sc.Capabilities)
	case pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser == 0:
		t.Errorf("%s: pod may run as root", d.Name)
	case c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero():
		t.Errorf("%s/%s: resources not set: %+v", d.Name, c.Name, c.Resources)
	}
}

func hasArg(c corev1.Container, arg string) bool { return slices.Contains(c.Args, arg) }

// TestTemplate renders the chart with default and non-default values and checks what
// each component gets.
func TestTemplate(t *testing.T) {
	h := newHelm(t)
	const internalURL = "--influx-url=http://rel-qas-influxdb.qas-system.svc:8086"
	cases := []struct {
		name   string
		values string
		check  func(t *testing.T, r rendered)
	}{{
		name: "defaults",
		check: func(t *testing.T, r rendered) {
			want := map[string]int{
				"CustomResourceDefinition": 1, "Deployment": 3, "StatefulSet": 1, "Service": 5,
				"ServiceAccount": 3, "ClusterRole": 4, "ClusterRoleBinding": 4, "Role": 2, "RoleBinding": 2,
				"Secret": 1, "MutatingWebhookConfiguration": 1, "ConfigMap": 1, "Lease": 1,
			}
			if got := r.kinds(); !mapsEqual(got, want) {
				t.Errorf("kinds = %v, want %v", got, want)
			}
			for _, o := range r.objs {
				if o.GetNamespace() == "" && o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetName(), "rel-") {
					t.Errorf("cluster-scoped %s %q does not carry the release name", o.GetKind(), o.GetName())
				}
				if o.GetNamespace() != "" && o.GetNamespace() != "qas-system" {
					t.Errorf("%s %q in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
				}
			}
			d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
			c := container(t, d, "decider")
			if *d.Spec.Replicas != 2 || c.Args[0] != "run" || d.Spec.Template.Spec.ServiceAccountName != "rel-qas-decider" {
				t.Errorf("decider: replicas %d, args %v, serviceAccount %q", *d.Spec.Replicas, c.Args, d.Spec.Template.Spec.ServiceAccountName)
			}
			for _, a := range []string{"--leader-elect=true", "--leader-election-namespace=qas-system",
				"--leader-election-id=rel-qas-decider", "--dry-run=false", internalURL, "--influx-bucket=qas/autogen", "--metrics-listen=:9903",
				// The pooled workloads' fronts run the webhook's proxy image.
				"--front-image=ghcr.io/qas-dev/qas-proxy:0.1.0", "--front-replicas=2"} {
				if !hasArg(c, a) {
					t.Errorf("decider args %v lack %s", c.Args, a)
				}
			}
			if e := envVar(c, "POD_NAME"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Errorf("decider POD_NAME = %+v, want the downward API's metadata.name", e)
			}
			if e := envVar(c, "POD_NAMESPACE"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("decider POD_NAMESPACE = %+v, want the downward API's metadata.namespace", e)
			}
			if envVar(c, "QAS_DECIDER_INFLUX_TOKEN") != nil {
				t.Error("internal InfluxDB needs no token, but the decider gets one")
			}
			if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
				t.Errorf("decider probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
			}
			hardened(t, d, c)

			col := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-collector"))
			cc := container(t, col, "collector")
			if !hasArg(cc, internalURL) || cc.Command[0] != "/usr/local/bin/qas-collector" {
				t.Errorf("collector command %v args %v", cc.Command, cc.Args)
			}
			hardened(t, col, cc)

			wh := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-webhook"))
			wc := container(t, wh, "webhook")
			for _, a := range []string{"webhook", "--secret=rel-qas-webhook-tls", "--webhook-config=rel-qas-inject", "--namespace=qas-system",
				"--proxy-image=ghcr.io/qas-dev/qas-proxy:0.1.0", "--dns-names=rel-qas-webhook.qas-system.svc,rel-qas-webhook.qas-system.svc.cluster.local"} {
				if !hasArg(wc, a) {
					t.Errorf("webhook args %v lack %s", wc.Args, a)
				}
			}
			if !hasArg(wc, `--proxy-resources={"limits":{"memory":"128Mi"},"requests":{"cpu":"50m","memory":"32Mi"}}`) ||
				slices.ContainsFunc(wc.Args, func(a string) bool { return strings.HasPrefix(a, "--proxy-image-pull-secrets") }) {
				t.Errorf("webhook args %v: want the default sidecar resources and no pull secrets", wc.Args)
			}
			if wc.ReadinessProbe == nil || wc.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("webhook readiness probe %+v, want HTTPS /healthz", wc.ReadinessProbe)
			}
			hardened(t, wh, wc)

			mwc := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, r.find("MutatingWebhookConfiguration", "rel-qas-inject"))
			hook := mwc.Webhooks[0]
			if *hook.FailurePolicy != admissionregistrationv1.Ignore || hook.ClientConfig.Service.Name != "rel-qas-webhook" ||
				*hook.ClientConfig.Service.Path != "/mutate" || len(hook.ClientConfig.CABundle) != 0 {
				t.Errorf("webhook: %+v", hook)
			}
			// Every pod but those that opt out reaches the webhook, so that opting in
			// by annotation works (decider/inject's integration test uses the same
			// selector through a real apiserver).
			if !reflect.DeepEqual(hook.ObjectSelector, inject.DefaultObjectSelector()) {
				t.Errorf("objectSelector %+v, want %+v", hook.ObjectSelector, inject.DefaultObjectSelector())
			}
			ex := hook.NamespaceSelector.MatchExpressions
			if len(ex) != 1 || !slices.Equal(ex[0].Values, []string{"kube-system", "qas-system"}) {
				t.Errorf("namespaceSelector %+v must exclude kube-system and the release namespace", hook.NamespaceSelector)
			}
			if _, ok := mwc.Annotations["cert-manager.io/inject-ca-from"]; ok {
				t.Error("self-managed certificates, but cert-manager's annotation is set")
			}
			sec := r.find("Secret", "rel-qas-webhook-tls")
			if sec == nil || sec.Object["data"] != nil || sec.Object["type"] != "Opaque" {
				t.Errorf("webhook Secret = %v, want an empty Opaque Secret the webhook fills", sec)
			}

			sts := convert[appsv1.StatefulSet](t, r.find("StatefulSet", "rel-qas-influxdb"))
			ic := sts.Spec.Template.Spec.Containers[0]
			if ic.Image != "influxdb:1.8.10" || envVar(ic, "INFLUXDB_HTTP_FLUX_ENABLED").Value != "true" || envVar(ic, "INFLUXDB_DB").Value != "qas" {
				t.Errorf("influxdb container %+v", ic)
			}
			if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				t.Errorf("influxdb PVC template %v, retention %+v", sts.Spec.VolumeClaimTemplates, sts.Spec.PersistentVolumeClaimRetentionPolicy)
			}
			// The governing Service is headless (stable pod DNS); clients use the other one.
			gov := convert[corev1.Service](t, r.find("Service", sts.Spec.ServiceName))
			if gov.Spec.ClusterIP != corev1.ClusterIPNone || !mapsSubset(gov.Spec.Selector, sts.Spec.Template.Labels) {
				t.Errorf("StatefulSet serviceName %q: clusterIP %q selector %v", sts.Spec.ServiceName, gov.Spec.ClusterIP, gov.Spec.Selector)
			}
			client := convert[corev1.Service](t, r.find("Service", "rel-qas-influxdb"))
			if client.Spec.ClusterIP == corev1.ClusterIPNone || sts.Spec.ServiceName == client.Name {
				t.Errorf("the clients' Service rel-qas-influxdb must keep a cluster IP (serviceName %q)", sts.Spec.ServiceName)
			}

			cm := convert[corev1.ConfigMap](t, r.find("ConfigMap", "rel-qas-dashboards"))
			if cm.Labels["grafana_dashboard"] != "1" || cm.Data["qas-workload.json"] == "" || cm.Data["qas-nodes.json"] == "" {
				t.Errorf("dashboards ConfigMap labels %v, keys %v", cm.Labels, keys(cm.Data))
			}
			checkDashboardsConfigMap(t, cm, "qas/autogen")
		},
	}, {
		name: "external InfluxDB, cert-manager, ServiceMonitor, dry run",
		values: `
decider: {dryRun: true, replicas: 3}
influxdb:
  mode: external
  bucket: metrics/autogen
  external:
    url: https://influx.example.com:8086
    tokenSecret: {name: influx-auth, key: api-token}
webhook:
  certManager: {enabled: true}
  failurePolicy: Fail
serviceMonitor: {enabled: true, labels: {release: prom}}
dashboards: {label: my_dashboards, labelValue: "yes"}
`,
		check: func(t *testing.T, r rendered) {
			k := r.kinds()
			if k["StatefulSet"] != 0 || k["Secret"] != 1 || k["Role"] != 1 || k["ServiceMonitor"] != 2 || k["Certificate"] != 1 || k["Issuer"] != 1 {
				t.Errorf("kinds = %v", k)
			}
			// The chart owns the Secret cert-manager fills, so that uninstall removes it;
			// it has the type and keys cert-manager applies (a Secret's type is immutable).
			sec := convert[corev1.Secret](t, r.find("Secret", "rel-qas-webhook-cert"))
			if sec.Type != corev1.SecretTypeTLS || len(sec.Data) != 2 || sec.Data["tls.crt"] == nil || sec.Data["tls.key"] == nil {
				t.Errorf("cert-manager's Secret: type %q data %v, want kubernetes.io/tls with empty tls.crt and tls.key", sec.Type, sec.Data)
			}
			for _, name := range []string{"rel-qas-decider", "rel-qas-collector"} {
				d := convert[appsv1.Deployment](t, r.find("Deployment", name))
				c := d.Spec.Template.Spec.Containers[0]
				if !hasArg(c, "--influx-url=https://influx.example.com:8086") || !hasArg(c, "--influx-bucket=metrics/autogen") {
					t.Errorf("%s args %v", name, c.Args)
				}
				prefix := map[string]string{"rel-qas-decider": runner.EnvPrefix, "rel-qas-collector": collectorapp.EnvPrefix}[name]
				e := envVar(c, prefix+"_INFLUX_TOKEN")
				if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "influx-auth" || e.ValueFrom.SecretKeyRef.Key != "api-token" {
					t.Errorf("%s token env = %+v, want secret influx-auth key api-token", name, e)
				}
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--influx-token") {
						t.Errorf("%s: token on the command line", name)
					}
				}
			}
			d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
			if *d.Spec.Replicas != 3 || !hasArg(d.Spec.Template.Spec.Containers[0], "--dry-run=true") {
				t.Errorf("decider replicas %d args %v", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
			}
			wh := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-webhook"))
			wc := container(t, wh, "webhook")
			if !hasArg(wc, "--cert-dir=/etc/qas/webhook-tls") || slices.ContainsFunc(wc.Args, func(a string) bool { return strings.HasPrefix(a, "--secret=") }) ||
				len(wc.VolumeMounts) != 1 || wh.Spec.Template.Spec.Volumes[0].Secret.SecretName != "rel-qas-webhook-cert" {
				t.Errorf("webhook with cert-manager: args %v mounts %v volumes %v", wc.Args, wc.VolumeMounts, wh.Spec.Template.Spec.Volumes)
			}
			mwc := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, r.find("MutatingWebhookConfiguration", "rel-qas-inject"))
			if mwc.Annotations["cert-manager.io/inject-ca-from"] != "qas-system/rel-qas-webhook" || *mwc.Webhooks[0].FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("MWC annotations %v failurePolicy %v", mwc.Annotations, *mwc.Webhooks[0].FailurePolicy)
			}
			cert := r.find("Certificate", "rel-qas-webhook")
			names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			if !slices.Contains(names, "rel-qas-webhook.qas-system.svc") || secret != "rel-qas-webhook-cert" {
				t.Errorf("certificate dnsNames %v secret %q", names, secret)
			}
			sm := r.find("ServiceMonitor", "rel-qas-decider")
			if sm.GetLabels()["release"] != "prom" {
				t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
			}
			port, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(port) != 1 || port[0].(map[string]any)["port"] != "metrics" {
				t.Errorf("ServiceMonitor endpoints %v", port)
			}
			if svc := r.find("Service", "rel-qas-decider-metrics"); svc == nil {
				t.Error("no decider metrics Service for the ServiceMonitor")
			}
			cm := r.find("ConfigMap", "rel-qas-dashboards")
			if cm.GetLabels()["my_dashboards"] != "yes" {
				t.Errorf("dashboards labels %v", cm.GetLabels())
			}
			checkDashboardsConfigMap(t, convert[corev1.ConfigMap](t, cm), "metrics/autogen")
		},
	}, {
		name: "webhook off, no persistence, no dashboards, leader election off",
		values: `
webhook: {enabled: false}
dashboards: {enabled: false}
decider: {replicas: 1, leaderElection: {enabled: false}}
influxdb: {internal: {persistence: {enabled: false}}}
tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
`,
		check: func(t *testing.T, r rendered) {
			k := r.kinds()
			if k["MutatingWebhookConfiguration"] != 0 || k["ConfigMap"] != 0 || k["Deployment"] != 2 || k["ClusterRole"] != 2 || k["Lease"] != 0 || k["Role"] != 0 || k["RoleBinding"] != 0 {
				t.Errorf("kinds = %v", k)
			}
			sts := convert[appsv1.StatefulSet](t, r.find("StatefulSet", "rel-qas-influxdb"))
			if len(sts.Spec.VolumeClaimTemplates) != 0 || sts.Spec.PersistentVolumeClaimRetentionPolicy != nil {
				t.Errorf("persistence off, but PVC templates %v", sts.Spec.VolumeClaimTemplates)
			}
			d := convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-decider"))
			if !hasArg(d.Spec.Template.Spec.Containers[0], "--leader-elect=false") || len(d.Spec.Template.Spec.Tolerations) != 1 {
				t.Errorf("decider args %v tolerations %v", d.Spec.Template.Spec.Containers[0].Args, d.Spec.Template.Spec.Tolerations)
			}
		},
	}, {
		name: "webhook: sidecar resources, pull secrets, extra arguments",
		values: `
webhook:
  proxy:
    resources: {requests: {cpu: 200m}, limits: {cpu: "1", memory: 1Gi}}
    imagePullSecrets: [{name: regcred}, {name: mirror}]
  extraArgs: [--log-level=debug]
`,
		check: func(t *testing.T, r rendered) {
			wc := container(t, convert[appsv1.Deployment](t, r.find("Deployment", "rel-qas-webhook")), "webhook")
			// Helm merges the values with the defaults: requests.memory stays 32Mi.
			for _, a := range []string{`--proxy-resources={"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"200m","memory":"32Mi"}}`,
				"--proxy-image-pull-secrets=regcred,mirror"} {
				if !hasArg(wc, a) {
					t.Errorf("webhook args %v lack %s", wc.Args, a)
				}
			}
			if last := wc.Args[len(wc.Args)-1]; last != "--log-level=debug" {
				t.Errorf("webhook args %v: extraArgs must come last (the flag parser keeps the last value)", wc.Args)
			}
		},
	}, {
		name:   "keep the InfluxDB volume",
		values: `influxdb: {internal: {persistence: {keep: true, storageClass: fast}}}`,
		check: func(t *testing.T, r rendered) {
			sts := convert[appsv1.StatefulSet](t, r.find("StatefulSet", "rel-qas-influxdb"))
			if sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
				*sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName != "fast" {
				t.Errorf("retention %+v, class %v", sts.Spec.PersistentVolumeClaimRetentionPolicy, sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"lint", chartDir(t), "--strict"}
			if tc.values != "" {
				args = append(args, "-f", valuesFile(t, tc.values))
			}
			if out, err := h.run(args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			tc.check(t, h.template(t, tc.values))
		})
	}
}

// checkDashboardsConfigMap: the ConfigMap holds every dashboard of charts/qas/dashboards
// unchanged but for the bucket variable, which defaults to the chart's bucket.
func checkDashboardsConfigMap(t *testing.T, cm *corev1.ConfigMap, bucket string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "dashboards", "*.json"))
	if err != nil || len(files) == 0 || len(cm.Data) != len(files) {
		t.Fatalf("ConfigMap keys %v, dashboards %v (%v)", keys(cm.Data), files, err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(cm.Data[filepath.Base(f)]), &got); err != nil {
			t.Fatalf("%s in the ConfigMap: %v", filepath.Base(f), err)
		}
		found := false
		for _, v := range want["templating"].(map[string]any)["list"].([]any) {
			if v := v.(map[string]any); v["name"] == "bucket" {
				v["query"], v["current"] = bucket, map[string]any{"text": bucket, "value": bucket}
				found = true
			}
		}
		if !found {
			t.Errorf("%s has no bucket variable", filepath.Base(f))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s in the ConfigMap is not the file with bucket %q:\n%s", filepath.Base(f), bucket, cm.Data[filepath.Base(f)])
		}
	}
}

// TestSchemaAccepts checks the schema lets through the values next to those
// TestSchemaRejects refuses, so that each rejection is about what it claims.
func TestSchemaAccepts(t *testing.T) {
	h := newHelm(t)
	for _, values := range []string{
		"decider: {replicas: 1, leaderElection: {enabled: false}}",
		"decider: {replicas: 3, leaderElection: {enabled: true}}",
		"collector: {replicas: 1}",
		"serviceMonitor: {enabled: true, interval: 1m30s}",
		"serviceMonitor: {enabled: true, interval: 500ms}",
		"webhook: {certManager: {enabled: true, issuerRef: {name: corp-ca, kind: ClusterIssuer}}}",
		"webhook: {certManager: {enabled: true, issuerRef: {}}}",
	} {
		t.Run(values, func(t *testing.T) {
			if out, err := h.run("template", "rel", chartDir(t), "-f", valuesFile(t, values)); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestSchemaRejects checks that values.schema.json refuses bad values with a message
// naming the field.
func TestSchemaRejects(t *testing.T) {
	h := newHelm(t)
	cases := []struct {
		values string
		want   []string // substrings of helm's error
	}{
		{"decider: {replicas: 0}", []string{"/decider/replicas", "minimum"}},
		{"influxdb: {mode: bogus}", []string{"/influxdb/mode", "internal", "external"}},
		{"image: {tag: ''}", []string{"/image/tag"}},
		{"webhook: {proxy: {image: {tag: ''}}}", []string{"/webhook/proxy/image/tag"}},
		{"webhook: {failurePolicy: Sometimes}", []string{"/webhook/failurePolicy"}},
		{"decider: {interval: fast}", []string{"/decider/interval"}},
		{"collector: {metricsPort: 70000}", []string{"/collector/metricsPort"}},
		{"log: {format: xml}", []string{"/log/format"}},
		{"influxdb: {mode: external}", []string{"/influxdb/external/url"}},
		{"influxdb: {mode: external, external: {url: influx:8086}}", []string{"/influxdb/external/url"}},
		{"decidr: {replicas: 2}", []string{"decidr"}},
		{"influxdb: {bucket: other/autogen}", []string{"influxdb.bucket", "influxdb.internal.database"}},
		// Two deciders without leader election would both act: the error names both ways out.
		{"decider: {replicas: 2, leaderElection: {enabled: false}}", []string{"/decider/replicas", "maximum", "/decider/leaderElection/enabled", "true"}},
		// The collector has no leader election or sharding.
		{"collector: {replicas: 2}", []string{"/collector/replicas", "maximum"}},
		// The Prometheus Operator refuses Go durations with fractions or units it lacks.
		{"serviceMonitor: {enabled: true, interval: 1.5s}", []string{"/serviceMonitor/interval"}},
		{"serviceMonitor: {enabled: true, interval: 100us}", []string{"/serviceMonitor/interval"}},
		{"serviceMonitor: {enabled: true, interval: ''}", []string{"/serviceMonitor/interval"}},
		// An issuerRef without a name would be silently replaced by the self-signed Issuer.
		{"webhook: {certManager: {enabled: true, issuerRef: {kind: ClusterIssuer}}}", []string{"/webhook/certManager/issuerRef", "name"}},
		{"webhook: {proxy: {imagePullSecrets: [regcred]}}", []string{"/webhook/proxy/imagePullSecrets/0"}},
		{"webhook: {proxy: {resources: {request: {cpu: 1}}}}", []string{"/webhook/proxy/resources", "request"}},
	}
	for _, tc := range cases {
		t.Run(tc.values, func(t *testing.T) {
			_, err := h.run("template", "rel", chartDir(t), "-f", valuesFile(t, tc.values))
			if err == nil {
				t.Fatalf("values %q were accepted", tc.values)
			}
			if !strings.Contains(err.Error(), "schema") && !strings.Contains(err.Error(), "influxdb.bucket") {
				t.Errorf("refused, but not by the schema:\n%v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func mapsSubset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestNotes renders NOTES.txt (helm install --dry-run=client) and checks it tells the
// user the next steps and what uninstall keeps.
func TestNotes(t *testing.T) {
	h := newHelm(t)
	cases := []struct {
		values string
		want   []string
	}{
		{"", []string{"qas.dev/inject", "QAS_APP_PORT", "kind: QueueAutoscaler", "kubectl get qa", "grafana_dashboard=1",
			"http://rel-qas-influxdb.ns1.svc:8086", "kubectl delete crd queueautoscalers.qas.dev", "Lease ns1/rel-qas-decider"}},
		{"influxdb: {internal: {persistence: {keep: true}}}\ndecider: {dryRun: true}", []string{"PVC data-rel-qas-influxdb-0", "dry run is ON"}},
		{"webhook: {enabled: false}\ndashboards: {enabled: false}", []string{"add the qas-proxy sidecar to your pods yourself", "dashboards.enabled is false"}},
	}
	for _, tc := range cases {
		t.Run(tc.values, func(t *testing.T) {
			args := []string{"install", "rel", chartDir(t), "--namespace", "ns1", "--dry-run=client"}
			if tc.values != "" {
				args = append(args, "-f", valuesFile(t, tc.values))
			}
			out, err := h.run(args...)
			if err != nil {
				t.Fatal(err)
			}
			_, notes, ok := strings.Cut(out, "NOTES:")
			if !ok {
				t.Fatalf("no NOTES in:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
		})
	}
}
