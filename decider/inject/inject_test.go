package inject

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qas-dev/qas/proxy/sidecar"
)

func appPod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{sidecar.InjectLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "example",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")},
			}},
			LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)},
			}},
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Path: "/metrics", Port: intstr.FromString("metrics")},
			}},
		}}},
	}
	if mod != nil {
		mod(p)
	}
	return p
}

// apply runs the mutation and applies its JSON patch like the apiserver does.
func apply(t *testing.T, c Config, pod *corev1.Pod) (*corev1.Pod, Result) {
	t.Helper()
	res, err := c.Mutate(pod)
	require.NoError(t, err)
	if len(res.Patch) == 0 {
		return pod, res
	}
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	pb, err := MarshalPatch(res.Patch)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(pb)
	require.NoError(t, err)
	out, err := patch.Apply(raw)
	require.NoError(t, err)
	var got corev1.Pod
	require.NoError(t, json.Unmarshal(out, &got))
	return &got, res
}

func container(p *corev1.Pod, name string) *corev1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == name {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

func TestMutateInjects(t *testing.T) {
	got, res := apply(t, DefaultConfig(), appPod(nil))
	require.Empty(t, res.Skip)
	require.Len(t, got.Spec.Containers, 2)
	app, proxy := container(got, "app"), container(got, sidecar.ContainerName)
	require.NotNil(t, proxy)

	// The proxy owns the serving port's name and number, so Services keep working.
	require.Equal(t, []corev1.ContainerPort{
		{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
		{Name: sidecar.AdminPortName, ContainerPort: sidecar.DefaultAdminPort, Protocol: corev1.ProtocolTCP},
	}, proxy.Ports)
	require.Equal(t, []string{"--listen=:8080", "--admin-listen=:9901", "--upstream=127.0.0.1:18080", "--drain=5s", "--shutdown-timeout=23s"}, proxy.Args)
	require.Equal(t, DefaultImage, proxy.Image)

	// The app moves to the app port and is told about it; other ports stay.
	require.Equal(t, []corev1.ContainerPort{
		{Name: AppPortName, ContainerPort: 18080, Protocol: corev1.ProtocolTCP},
		{Name: "metrics", ContainerPort: 9090},
	}, app.Ports)
	require.Contains(t, app.Env, corev1.EnvVar{Name: EnvAppPort, Value: "18080"})

	// Probes on the serving port (by name or number) reach the app directly.
	require.Equal(t, intstr.FromInt32(18080), app.ReadinessProbe.HTTPGet.Port)
	require.Equal(t, intstr.FromInt32(18080), app.LivenessProbe.TCPSocket.Port)
	require.Equal(t, intstr.FromString("metrics"), app.StartupProbe.HTTPGet.Port, "probes on other ports are untouched")
	require.Equal(t, intstr.FromString(sidecar.AdminPortName), proxy.ReadinessProbe.HTTPGet.Port)

	// Restrictive security context and resources.
	sc := proxy.SecurityContext
	require.True(t, *sc.RunAsNonRoot)
	require.True(t, *sc.ReadOnlyRootFilesystem)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Equal(t, "50m", proxy.Resources.Requests.Cpu().String())
	require.Equal(t, "128Mi", proxy.Resources.Limits.Memory().String())

	require.Equal(t, map[string]string{sidecar.InjectedAnnotation: "true", AnnotationAppPort: "18080", sidecar.AdminPortAnnotation: "9901"}, got.Annotations)
	require.Equal(t, map[string]string{sidecar.InjectLabel: "true"}, got.Labels)

	// Idempotent: a second pass changes nothing.
	again, res2 := apply(t, DefaultConfig(), got)
	require.Empty(t, res2.Patch)
	require.Contains(t, res2.Skip, "already injected")
	require.Equal(t, got, again)
}

func TestMutateSkips(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mod      func(*corev1.Pod)
		skip     string
		annotate bool // the pod opted in, so the reason is recorded on it
	}{
		{"not opted in", func(p *corev1.Pod) { p.Labels = nil }, "did not opt in", false},
		{"label false", func(p *corev1.Pod) { p.Labels[sidecar.InjectLabel] = "false" }, "did not opt in", false},
		{"label false wins over the annotation", func(p *corev1.Pod) {
			p.Labels[sidecar.InjectLabel] = "false"
			p.Annotations = map[string]string{sidecar.InjectLabel: "true"}
		}, "did not opt in", false},
		{"bad concurrency", func(p *corev1.Pod) { p.Annotations = map[string]string{sidecar.ConcurrencyAnnotation: "0"} }, `annotation qas.dev/concurrency="0" is not a positive integer`, true},
		{"already annotated", func(p *corev1.Pod) { p.Annotations = map[string]string{sidecar.InjectedAnnotation: "true"} }, "already injected (annotation", false},
		{"sidecar present", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: sidecar.ContainerName})
		}, "already injected (container", false},
		{"no named port", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Name = "web" }, `no container has a port named "http"`, true},
		{"UDP port", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = corev1.ProtocolUDP }, "only TCP can be proxied", true},
		{"bad app protocol", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationAppProtocol: "h2"} },
			`annotation qas.dev/app-protocol="h2" is not one of kubernetes.io/h2c, grpc, http, kubernetes.io/ws`, true},
		{"bad app port", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationAppPort: "x"} }, `annotation qas.dev/app-port="x" is not a port number`, true},
		{"app port taken", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationAppPort: "9090"} }, `port 9090 is already used by container "app"`, true},
		{"admin port taken", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[1].ContainerPort = sidecar.DefaultAdminPort }, `port 9901 is already used`, true},
		{"default app port out of range", func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 60000 }, "default app port 70000 is out of range", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := apply(t, DefaultConfig(), appPod(tc.mod))
			require.Contains(t, res.Skip, tc.skip)
			require.Len(t, got.Spec.Containers, len(appPod(tc.mod).Spec.Containers), "no container added")
			if tc.annotate {
				require.Equal(t, res.Skip, got.Annotations[AnnotationSkipReason])
			} else {
				require.Empty(t, res.Patch)
			}
		})
	}
}

func TestMutateOptions(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mod        func(*corev1.Pod)
		app        string
		arg        string
		proxyPorts int32
		labels     map[string]string
	}{
		{"annotation opt-in gets the label", func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Annotations = map[string]string{sidecar.InjectLabel: "true"}
		}, "app", "--upstream=127.0.0.1:18080", 8080, map[string]string{"app": "web", sidecar.InjectLabel: "true"}},
		{"annotation opt-in without labels", func(p *corev1.Pod) {
			p.Labels = nil
			p.Annotations = map[string]string{sidecar.InjectLabel: "true"}
		}, "app", "--upstream=127.0.0.1:18080", 8080, map[string]string{sidecar.InjectLabel: "true"}},
		{"explicit app port", func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationAppPort: "7000"} }, "app", "--upstream=127.0.0.1:7000", 8080, nil},
		{"concurrency", func(p *corev1.Pod) { p.Annotations = map[string]string{sidecar.ConcurrencyAnnotation: "4"} }, "app", "--concurrency=4", 8080, nil},
		{"port name annotation, second container", func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnnotationPort: "web"}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "web", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 3000}}})
		}, "web", "--upstream=127.0.0.1:13000", 3000, nil},
		{"gRPC probe", func(p *corev1.Pod) {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 8080}}}
		}, "app", "--upstream=127.0.0.1:18080", 8080, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := apply(t, DefaultConfig(), appPod(tc.mod))
			require.Empty(t, res.Skip)
			proxy := container(got, sidecar.ContainerName)
			require.Contains(t, proxy.Args, tc.arg)
			if tc.labels != nil {
				require.Equal(t, tc.labels, got.Labels)
			}
			require.Equal(t, tc.proxyPorts, proxy.Ports[0].ContainerPort)
			app := container(got, tc.app)
			require.Equal(t, AppPortName, app.Ports[0].Name)
			if app.ReadinessProbe != nil && app.ReadinessProbe.GRPC != nil {
				g := app.ReadinessProbe.GRPC
				require.Equal(t, int32(18080), g.Port)
			}
		})
	}
}

// TestDefaultObjectSelector: the chart's selector sends labelled and unlabelled pods
// (which may opt in by annotation) to the webhook, but not pods that opt out.
func TestDefaultObjectSelector(t *testing.T) {
	sel, err := metav1.LabelSelectorAsSelector(DefaultObjectSelector())
	require.NoError(t, err)
	for _, tc := range []struct {
		labels map[string]string
		sent   bool
	}{
		{nil, true},
		{map[string]string{"app": "web"}, true},
		{map[string]string{sidecar.InjectLabel: "true"}, true},
		{map[string]string{sidecar.InjectLabel: "false"}, false},
	} {
		require.Equal(t, tc.sent, sel.Matches(labels.Set(tc.labels)), "%v", tc.labels)
	}
}

// TestSidecarDrainFitsGracePeriod: the proxy's drain and shutdown wait end within the
// pod's terminationGracePeriodSeconds (Kubernetes' 30 s when unset), so the kubelet
// never kills it with requests in flight (issue #17, defect 9).
func TestSidecarDrainFitsGracePeriod(t *testing.T) {
	grace := func(s int64) *int64 { return &s }
	for _, tc := range []struct {
		grace           *int64
		drain, shutdown string
	}{
		{nil, "5s", "23s"},
		{grace(30), "5s", "23s"},
		{grace(120), "5s", "1m53s"},
		{grace(10), "2.5s", "5.5s"},
		{grace(0), "0s", "1ms"},
	} {
		pod := appPod(nil)
		pod.Spec.TerminationGracePeriodSeconds = tc.grace
		got, res := apply(t, DefaultConfig(), pod)
		require.Empty(t, res.Skip)
		args := container(got, sidecar.ContainerName).Args
		require.Contains(t, args, "--drain="+tc.drain)
		require.Contains(t, args, "--shutdown-timeout="+tc.shutdown)
		g := DefaultTerminationGracePeriod
		if tc.grace != nil {
			g = time.Duration(*tc.grace) * time.Second
		}
		d, err := time.ParseDuration(tc.drain)
		require.NoError(t, err)
		s, err := time.ParseDuration(tc.shutdown)
		require.NoError(t, err)
		if g > 0 {
			require.Less(t, d+s, g, "drain and shutdown end before the grace period")
		}
	}
}
