// Package inject is the mutating admission webhook that adds the qas-proxy sidecar
// to pods that opt in.
//
// The proxy takes over the pod's serving port: the app container's port named
// Config.PortName (annotation qas.dev/port overrides it, default "http") moves to the
// proxy container under the same name and number, so a Service whose targetPort is
// that name (or number) now reaches the proxy. The app container keeps a port named
// "qas-app" on the app port (annotation qas.dev/app-port, default the serving port
// plus 10000); the app must listen there, and it is told through the QAS_APP_PORT
// environment variable. The proxy is started with --upstream=127.0.0.1:<app port>.
// Probes of the app container that referred to the serving port (by name or number)
// are rewritten to the app port, so they keep reaching the app directly and are not
// counted as traffic by the proxy. Annotation qas.dev/concurrency sets the proxy's
// per-pod concurrency limit k (--concurrency; the QueueAutoscaler's spec.concurrency
// should match it); without it the proxy admits every request at once. A serving
// port for HTTP/2 cleartext (gRPC) gets --upstream-protocol=h2c: one named h2c,
// grpc[-*] or http2[-*], or any port with annotation qas.dev/app-protocol
// kubernetes.io/h2c or grpc.
//
// A pod opts in with the label qas.dev/inject: "true", or with that annotation when it
// has no such label (a label with another value, such as "false", opts out). An
// injected pod always carries the label, which is what the collector's discovery
// selects, so annotation opt-in reaches the collector too.
package inject

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qas-dev/qas/proxy/sidecar"
)

// The webhook's own annotations and names; the contract it shares with the proxy, the
// collector and the controller is in proxy/sidecar.
const (
	// AnnotationPort names the app's serving port to move (default DefaultPortName).
	AnnotationPort = "qas.dev/port"
	// AnnotationAppPort is the port the app listens on after injection.
	AnnotationAppPort = "qas.dev/app-port"
	// AnnotationSkipReason says why an opted-in pod was not injected.
	AnnotationSkipReason = "qas.dev/inject-skipped"
	// AnnotationPooling names the pooled workload whose front the pod's proxy uses
	// (set by the webhook; absent when the pod's workload does not pool).
	AnnotationPooling = "qas.dev/pooling"

	// DefaultPortName is the serving port name moved to the proxy.
	DefaultPortName = "http"
	// AppPortName is the app container's port name after injection.
	AppPortName = "qas-app"
	// DefaultAppPortOffset is added to the serving port when no app port is given.
	DefaultAppPortOffset = 10000
	// DefaultImage is the proxy image.
	DefaultImage = "ghcr.io/qas-dev/qas-proxy:latest"
	// EnvAppPort tells the app which port to listen on.
	EnvAppPort = "QAS_APP_PORT"
)

// Config is what the webhook injects.
type Config struct {
	Image     string
	AdminPort int32
	Resources corev1.ResourceRequirements
	// ImagePullSecrets are added to the pod's imagePullSecrets (those it lacks), to
	// pull Image from a private registry.
	ImagePullSecrets []string
	// Pooling tells which pods belong to a workload with routing pooled, whose proxy
	// then joins the pooled data plane (pooling.go); nil: none does.
	Pooling PoolingLookup
}

// DefaultConfig returns the default sidecar: small requests, a memory limit.
func DefaultConfig() Config {
	return Config{
		Image:     DefaultImage,
		AdminPort: sidecar.DefaultAdminPort,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
	}
}

// PatchOp is one RFC 6902 JSON Patch operation.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// Result is the outcome of Mutate: a patch, or the reason nothing is injected.
type Result struct {
	Patch []PatchOp
	// Skip is empty when the pod is injected, otherwise why it is not.
	Skip string
	// Warnings are returned to the pod's creator: the pod is injected, but not all
	// as configured (pooling could not be set up).
	Warnings []string
}

// OptedIn reports whether the pod asks for injection: label qas.dev/inject="true", or
// with no such label, annotation qas.dev/inject="true".
func OptedIn(pod *corev1.Pod) bool {
	if v, ok := pod.Labels[sidecar.InjectLabel]; ok {
		return v == "true"
	}
	return pod.Annotations[sidecar.InjectLabel] == "true"
}

// DefaultObjectSelector is the webhook's objectSelector in the Helm chart: every pod
// except those labelled qas.dev/inject with a value other than "true" reaches the
// webhook, so that a pod can opt in by annotation (which no selector can see).
func DefaultObjectSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: sidecar.InjectLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"},
	}}}
}

// Mutate computes the patch that injects the sidecar into pod. Pods that did not opt
// in, already have the sidecar, or lack the serving port get no injection and a
// reason; an opted-in pod that cannot be injected also gets AnnotationSkipReason.
func (c Config) Mutate(pod *corev1.Pod) (Result, error) {
	if !OptedIn(pod) {
		return Result{Skip: "pod did not opt in (label " + sidecar.InjectLabel + `="true", or that annotation without the label)`}, nil
	}
	if pod.Annotations[sidecar.InjectedAnnotation] != "" {
		return Result{Skip: "already injected (annotation " + sidecar.InjectedAnnotation + ")"}, nil
	}
	for _, ct := range pod.Spec.Containers {
		if ct.Name == sidecar.ContainerName {
			return Result{Skip: "already injected (container " + sidecar.ContainerName + " exists)"}, nil
		}
	}
	portName := DefaultPortName
	if v := pod.Annotations[AnnotationPort]; v != "" {
		portName = v
	}
	ci, pi := -1, -1
	for i, ct := range pod.Spec.Containers {
		for j, p := range ct.Ports {
			if p.Name == portName {
				ci, pi = i, j
				break
			}
		}
		if ci >= 0 {
			break
		}
	}
	if ci < 0 {
		return c.skipped(pod, fmt.Sprintf("no container has a port named %q (set annotation %s to the serving port's name)", portName, AnnotationPort))
	}
	serving := pod.Spec.Containers[ci].Ports[pi]
	if serving.Protocol != "" && serving.Protocol != corev1.ProtocolTCP {
		return c.skipped(pod, fmt.Sprintf("port %q is %s; only TCP can be proxied", portName, serving.Protocol))
	}
	appPort := serving.ContainerPort + DefaultAppPortOffset
	if v := pod.Annotations[AnnotationAppPort]; v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > 65535 {
			return c.skipped(pod, fmt.Sprintf("annotation %s=%q is not a port number", AnnotationAppPort, v))
		}
		appPort = int32(n)
	}
	if appPort > 65535 {
		return c.skipped(pod, fmt.Sprintf("default app port %d is out of range; set annotation %s", appPort, AnnotationAppPort))
	}
	for _, ct := range pod.Spec.Containers {
		for _, p := range ct.Ports {
			if p.ContainerPort == appPort || p.ContainerPort == c.AdminPort {
				return c.skipped(pod, fmt.Sprintf("port %d is already used by container %q; set annotation %s", p.ContainerPort, ct.Name, AnnotationAppPort))
			}
		}
	}
	if appPort == c.AdminPort || appPort == serving.ContainerPort {
		return c.skipped(pod, fmt.Sprintf("app port %d collides with the proxy's ports", appPort))
	}
	h2c, bad := upstreamH2C(pod.Annotations, serving.Name)
	if bad != "" {
		return c.skipped(pod, bad)
	}
	concurrency := 0
	if v, ok := pod.Annotations[sidecar.ConcurrencyAnnotation]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c.skipped(pod, fmt.Sprintf("annotation %s=%q is not a positive integer", sidecar.ConcurrencyAnnotation, v))
		}
		concurrency = n
	}

	containers := make([]corev1.Container, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		containers[i] = *pod.Spec.Containers[i].DeepCopy()
	}
	app := &containers[ci]
	app.Ports[pi] = corev1.ContainerPort{Name: AppPortName, ContainerPort: appPort, Protocol: corev1.ProtocolTCP}
	app.Env = append(app.Env, corev1.EnvVar{Name: EnvAppPort, Value: strconv.Itoa(int(appPort))})
	for _, pr := range []*corev1.Probe{app.LivenessProbe, app.ReadinessProbe, app.StartupProbe} {
		retargetProbe(pr, serving, appPort)
	}
	pooled, warning := c.poolingFor(pod)
	workload := pooled.Workload
	if workload != "" && concurrency == 0 {
		// A pooled proxy overflows when its k slots are busy, so it needs k: the
		// QueueAutoscaler's spec.concurrency (its default, 1, when unset).
		concurrency = max(pooled.Concurrency, 1)
	}
	proxy := c.sidecar(serving, appPort, concurrency, h2c, pod.Spec.TerminationGracePeriodSeconds)
	var poolVolumes []corev1.Volume
	if workload != "" {
		var w string
		poolVolumes, w = poolProxy(&proxy, pod, containers, workload)
		if w != "" {
			warning = w
		}
	}
	containers = append(containers, proxy)

	ann := map[string]string{}
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[sidecar.InjectedAnnotation] = "true"
	ann[AnnotationAppPort] = strconv.Itoa(int(appPort))
	ann[sidecar.AdminPortAnnotation] = strconv.Itoa(int(c.AdminPort))
	delete(ann, AnnotationSkipReason)
	delete(ann, AnnotationPooling)
	if workload != "" {
		ann[AnnotationPooling] = workload
	}
	// The label marks the pod for the collector's discovery also when it opted in by
	// annotation.
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[sidecar.InjectLabel] = "true"
	res := Result{Patch: append([]PatchOp{
		{Op: "replace", Path: "/spec/containers", Value: containers},
		{Op: "add", Path: "/metadata/annotations", Value: ann},
		{Op: "add", Path: "/metadata/labels", Value: labels},
	}, c.pullSecretsPatch(pod)...)}
	if len(poolVolumes) > 0 {
		// "add" of a member that exists replaces it (RFC 6902): the pod's volumes and ours.
		volumes := append(append([]corev1.Volume{}, pod.Spec.Volumes...), poolVolumes...)
		res.Patch = append(res.Patch, PatchOp{Op: "add", Path: "/spec/volumes", Value: volumes})
	}
	if warning != "" {
		res.Warnings = append(res.Warnings, warning)
	}
	return res, nil
}

func (c Config) skipped(pod *corev1.Pod, reason string) (Result, error) {
	ann := map[string]string{}
	for k, v := range pod.Annotations {
		ann[k] = v
	}
	ann[AnnotationSkipReason] = reason
	return Result{Skip: reason, Patch: []PatchOp{{Op: "add", Path: "/metadata/annotations", Value: ann}}}, nil
}

// retargetProbe points a probe that used the serving port at the app port.
func retargetProbe(pr *corev1.Probe, serving corev1.ContainerPort, appPort int32) {
	if pr == nil {
		return
	}
	fix := func(p *intstr.IntOrString) {
		if (p.Type == intstr.String && p.StrVal == serving.Name) || (p.Type == intstr.Int && p.IntVal == serving.ContainerPort) {
			*p = intstr.FromInt32(appPort)
		}
	}
	switch {
	case pr.HTTPGet != nil:
		fix(&pr.HTTPGet.Port)
	case pr.TCPSocket != nil:
		fix(&pr.TCPSocket.Port)
	case pr.GRPC != nil:
		if pr.GRPC.Port == serving.ContainerPort {
			pr.GRPC.Port = appPort
		}
	}
}

func (c Config) sidecar(serving corev1.ContainerPort, appPort int32, concurrency int, h2c bool, graceSeconds *int64) corev1.Container {
	yes, no := true, false
	uid := int64(65532)
	drain, shutdown := drainWithin(graceSeconds)
	args := []string{
		fmt.Sprintf("--listen=:%d", serving.ContainerPort),
		fmt.Sprintf("--admin-listen=:%d", c.AdminPort),
		fmt.Sprintf("--upstream=127.0.0.1:%d", appPort),
		"--drain=" + drain.String(),
		"--shutdown-timeout=" + shutdown.String(),
	}
	if h2c {
		args = append(args, "--upstream-protocol=h2c")
	}
	if concurrency > 0 {
		args = append(args, fmt.Sprintf("--concurrency=%d", concurrency))
	}
	return corev1.Container{
		Name:  sidecar.ContainerName,
		Image: c.Image,
		Args:  args,
		Ports: []corev1.ContainerPort{
			{Name: serving.Name, ContainerPort: serving.ContainerPort, Protocol: corev1.ProtocolTCP},
			{Name: sidecar.AdminPortName, ContainerPort: c.AdminPort, Protocol: corev1.ProtocolTCP},
		},
		Resources: *c.Resources.DeepCopy(),
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(sidecar.AdminPortName)},
		}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             &yes,
			RunAsUser:                &uid,
			ReadOnlyRootFilesystem:   &yes,
			AllowPrivilegeEscalation: &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// DefaultTerminationGracePeriod is Kubernetes' default terminationGracePeriodSeconds.
const DefaultTerminationGracePeriod = 30 * time.Second

// drainWithin splits the pod's termination grace period (Kubernetes' default when
// unset) into the proxy's --drain and --shutdown-timeout so that both end before the
// kubelet kills the pod: a quarter, at most 5 s, drains (the endpoints go), and the
// rest less a margin (a fifth, at most 2 s) lets in-flight requests finish. A proxy
// still waiting when the grace period ends would be killed with those requests.
func drainWithin(graceSeconds *int64) (drain, shutdown time.Duration) {
	grace := DefaultTerminationGracePeriod
	if graceSeconds != nil {
		grace = time.Duration(max(*graceSeconds, 0)) * time.Second
	}
	drain = min(5*time.Second, grace/4)
	margin := min(2*time.Second, grace/5)
	shutdown = grace - drain - margin
	if shutdown <= 0 {
		shutdown = time.Millisecond // 0 would mean the proxy's default
	}
	return drain, shutdown
}

// MarshalPatch encodes a patch as JSON.
func MarshalPatch(ops []PatchOp) ([]byte, error) { return json.Marshal(ops) }
