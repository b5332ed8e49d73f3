package controller

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/proxy/sidecar"
)

// The pooled data plane (docs/pooling.md): for a QueueAutoscaler with routing pooled
// the controller keeps, in its namespace and owned by it (so that deleting it deletes
// them):
//   - Secret qas-pooling-<workload>: the 32-byte HMAC key sidecars and fronts
//     authenticate each other with, created once and never rewritten unless the
//     QueueAutoscaler asks (RotatePoolingKeyAnnotation);
//   - Role and RoleBinding qas-pooling-<workload>: get, list and watch on
//     endpointslices in the namespace, bound to the ServiceAccounts of the workload's
//     pods, so that their sidecars can find the front;
//   - Deployment and Service qas-front-<workload>: the front (qas-proxy --mode front).
//
// <workload> is the scale target's name, the name the sidecars, the front and the
// collector know the workload by. When routing goes back to random the controller
// deletes them, and it never touches an object of those names it does not own.

// PoolingReadyCondition is the QueueAutoscaler's condition about its pooled data
// plane; it is absent unless routing is pooled.
const PoolingReadyCondition = "PoolingReady"

// RotatePoolingKeyAnnotation on a QueueAutoscaler asks for a new pooling key: when its
// value differs from the one the Secret was last rotated for (PoolingKeyRotationAnnotation),
// the key is replaced and the old one kept as the Secret's "previous" key.
const RotatePoolingKeyAnnotation = "qas.dev/rotate-pooling-key"

// PoolingKeyRotationAnnotation on the pooling Secret is the value of
// RotatePoolingKeyAnnotation its key was last written for.
const PoolingKeyRotationAnnotation = "qas.dev/pooling-key-rotation"

// PoolingHashAnnotation holds the hash of what the controller last wrote into a
// pooling object, so that it rewrites the object only when that changes (the API
// server fills in defaults, so the objects themselves never compare equal).
const PoolingHashAnnotation = "qas.dev/pooling-hash"

// FrontContainerName is the front Deployment's container: qas-proxy, so that the
// injection webhook, which skips pods that have that container, leaves it alone.
const FrontContainerName = sidecar.ContainerName

// FrontConfig is what the controller runs as a pooled workload's front.
type FrontConfig struct {
	// Image is the qas-proxy image (the one the webhook injects).
	Image string
	// Replicas is the front's replica count (2, for availability).
	Replicas int32
	// Port is the front's pool port (overflow and pull), AdminPort its admin port.
	Port, AdminPort int32
	// Resources of the front container.
	Resources corev1.ResourceRequirements
	// ImagePullSecrets are given to the front's pods to pull Image.
	ImagePullSecrets []string
	// NodeSelector and Tolerations place the front's pods.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// DefaultFrontImage is FrontConfig.Image's default.
const DefaultFrontImage = "ghcr.io/qas-dev/qas-proxy:latest"

// DefaultFrontConfig is the front the controller runs unless told otherwise: two
// replicas, requesting a tenth of a core each (a Go proxy spends about 50–100 µs per
// request: ~0.1 core at 1000 overflowing requests/s, docs/pooling.md).
func DefaultFrontConfig() FrontConfig {
	return FrontConfig{
		Image: DefaultFrontImage, Replicas: 2, Port: sidecar.DefaultPoolPort, AdminPort: sidecar.DefaultAdminPort,
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}
}

// Validate checks a FrontConfig; each error names the field.
func (f FrontConfig) Validate() error {
	switch {
	case f.Image == "":
		return errors.New("front image must not be empty")
	case f.Replicas < 1:
		return fmt.Errorf("front replicas %d: at least 1", f.Replicas)
	case f.Port < 1 || f.Port > 65535 || f.AdminPort < 1 || f.AdminPort > 65535:
		return fmt.Errorf("front ports %d and %d must be port numbers", f.Port, f.AdminPort)
	case f.Port == f.AdminPort:
		return fmt.Errorf("front pool port and admin port are both %d", f.Port)
	}
	for _, s := range f.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fmt.Errorf("front image pull secret %q: %s", s, strings.Join(errs, "; "))
		}
	}
	return nil
}

// pooled reports whether qa asks for the pooled data plane.
func pooled(qa *v1alpha1.QueueAutoscaler) bool { return qa.Spec.Routing == "pooled" }

// poolingOutcome is what reconcilePooling found, for the status.
type poolingOutcome struct {
	// active: routing is pooled, or its objects could not all be removed (the
	// condition is set); otherwise the condition is removed.
	active          bool
	removing        bool
	ready, replicas int32
	err             error
}

// condition applies the outcome to the status.
func (o poolingOutcome) condition(st *v1alpha1.QueueAutoscalerStatus, workload string, gen int64, now time.Time) {
	if !o.active {
		st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool { return c.Type == PoolingReadyCondition })
		return
	}
	switch {
	case o.removing:
		resources.SetCondition(st, PoolingReadyCondition, metav1.ConditionFalse, "FailedPoolingRemoval",
			"routing is no longer pooled, but not every pooling object could be deleted (retried each cycle): "+o.err.Error(), gen, now)
	case o.err != nil:
		resources.SetCondition(st, PoolingReadyCondition, metav1.ConditionFalse, "FailedPooling", o.err.Error(), gen, now)
	case o.ready == 0:
		resources.SetCondition(st, PoolingReadyCondition, metav1.ConditionFalse, "FrontNotReady",
			fmt.Sprintf("front %s: none of %d replicas ready yet; sidecars queue locally meanwhile", sidecar.FrontName(workload), o.replicas), gen, now)
	default:
		resources.SetCondition(st, PoolingReadyCondition, metav1.ConditionTrue, "FrontReady",
			fmt.Sprintf("front %s: %d of %d replicas ready", sidecar.FrontName(workload), o.ready, o.replicas), gen, now)
	}
}

// reconcilePooling makes the pooling objects match qa: created or updated when routing
// is pooled, deleted otherwise. pods are the target's pods (their ServiceAccounts get
// the Role). A failure is announced as a Warning Event and returned in the outcome; it
// does not stop the decision cycle (the sidecars queue locally without a front).
func (c *Controller) reconcilePooling(ctx context.Context, qa *v1alpha1.QueueAutoscaler, pods []*corev1.Pod) poolingOutcome {
	workload := qa.Spec.ScaleTargetRef.Name
	if !pooled(qa) {
		// Only a QueueAutoscaler that was pooled (its condition says so) can own pooling
		// objects: the others cost no request.
		if meta.FindStatusCondition(qa.Status.Conditions, PoolingReadyCondition) == nil {
			return poolingOutcome{}
		}
		if err := c.removePooling(ctx, qa, workload); err != nil {
			c.Recorder.Event(qa, corev1.EventTypeWarning, "FailedPooling", err.Error())
			return poolingOutcome{active: true, removing: true, err: err}
		}
		return poolingOutcome{}
	}
	out := poolingOutcome{active: true}
	ready, replicas, err := c.ensurePooling(ctx, qa, workload, pods)
	if err != nil {
		out.err = err
		c.Recorder.Event(qa, corev1.EventTypeWarning, "FailedPooling", err.Error())
	}
	out.ready, out.replicas = ready, replicas
	return out
}

func (c *Controller) frontConfig() FrontConfig {
	if c.Front.Image == "" {
		return DefaultFrontConfig()
	}
	return c.Front
}

func (c *Controller) ensurePooling(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, pods []*corev1.Pod) (ready, replicas int32, err error) {
	if len(workload) > sidecar.MaxPoolingWorkloadName {
		return 0, 0, fmt.Errorf("routing pooled: the workload name %q is longer than %d characters, too long for the front Service %q", workload, sidecar.MaxPoolingWorkloadName, sidecar.FrontName(workload))
	}
	cfg := c.frontConfig()
	if err := cfg.Validate(); err != nil {
		return 0, 0, fmt.Errorf("routing pooled: the decider's front configuration: %w", err)
	}
	owner := ownerOf(qa)
	var errs []error
	if err := c.ensurePoolingSecret(ctx, qa, workload, owner); err != nil {
		errs = append(errs, err)
	}
	if err := c.ensurePoolingRBAC(ctx, qa, workload, owner, pods); err != nil {
		errs = append(errs, err)
	}
	dep, err := c.ensureFront(ctx, qa, workload, owner, cfg)
	if err != nil {
		errs = append(errs, err)
	}
	if err := c.ensureFrontService(ctx, qa, workload, owner, cfg); err != nil {
		errs = append(errs, err)
	}
	if dep != nil {
		ready = dep.Status.ReadyReplicas
		if dep.Spec.Replicas != nil {
			replicas = *dep.Spec.Replicas
		}
	}
	return ready, replicas, errors.Join(errs...)
}

// ownerOf is the owner reference the pooling objects carry: the QueueAutoscaler, as
// their controller, so that the garbage collector deletes them with it. It does not
// block the owner's deletion (that would need update on queueautoscalers/finalizers).
func ownerOf(qa *v1alpha1.QueueAutoscaler) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "QueueAutoscaler", Name: qa.Name, UID: qa.UID, Controller: &yes,
	}
}

// ownedBy reports whether obj's controller is the QueueAutoscaler with that UID.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	return ref != nil && ref.UID == uid
}

// notOwned is the error for an object of a pooling name that the QueueAutoscaler does
// not own: the controller leaves it alone.
func notOwned(kind, ns, name string, qa *v1alpha1.QueueAutoscaler) error {
	return fmt.Errorf("%s %s/%s exists and is not owned by QueueAutoscaler %s: rename or delete it, the pooled data plane needs the name", kind, ns, name, qa.Name)
}

// poolingLabels are on every pooling object.
func poolingLabels(workload string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "qas-decider",
		"app.kubernetes.io/part-of":    "qas",
		sidecar.FrontOfLabel:           workload,
	}
}

// frontSelector selects the front's pods.
func frontSelector(workload string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "qas-front", sidecar.FrontOfLabel: workload}
}

// hashOf hashes what the controller writes into an object.
func hashOf(v any) string {
	data, _ := json.Marshal(v)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:12])
}

// NewPoolingKey returns a fresh pooling key.
func NewPoolingKey() ([]byte, error) {
	key := make([]byte, sidecar.PoolKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("pooling key: %w", err)
	}
	return key, nil
}

func (c *Controller) ensurePoolingSecret(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, owner metav1.OwnerReference) error {
	name := sidecar.PoolingName(workload)
	api := c.Kube.CoreV1().Secrets(qa.Namespace)
	rotation := qa.Annotations[RotatePoolingKeyAnnotation]
	s, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		key, err := NewPoolingKey()
		if err != nil {
			return err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: qa.Namespace, Labels: poolingLabels(workload),
				Annotations: map[string]string{PoolingKeyRotationAnnotation: rotation}, OwnerReferences: []metav1.OwnerReference{owner}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{sidecar.PoolKeyItem: key},
		}
		if _, err := api.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pooling Secret %s/%s: %w", qa.Namespace, name, err)
		}
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "PoolingKeyCreated", "created the pooling key Secret %s", name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get pooling Secret %s/%s: %w", qa.Namespace, name, err)
	}
	if !ownedBy(s, qa.UID) {
		return notOwned("Secret", qa.Namespace, name, qa)
	}
	if s.Annotations[PoolingKeyRotationAnnotation] == rotation {
		if n := len(s.Data[sidecar.PoolKeyItem]); n != sidecar.PoolKeyBytes {
			// Never rewritten unless asked: a key changed by hand is reported, not replaced.
			return fmt.Errorf("pooling Secret %s/%s: its %q is %d bytes, want %d; set annotation %s on the QueueAutoscaler to a new value to write a new key",
				qa.Namespace, name, sidecar.PoolKeyItem, n, sidecar.PoolKeyBytes, RotatePoolingKeyAnnotation)
		}
		return nil
	}
	key, err := NewPoolingKey()
	if err != nil {
		return err
	}
	s = s.DeepCopy()
	if old := s.Data[sidecar.PoolKeyItem]; len(old) == sidecar.PoolKeyBytes {
		s.Data[sidecar.PoolPreviousKeyItem] = old
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[sidecar.PoolKeyItem] = key
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[PoolingKeyRotationAnnotation] = rotation
	if _, err := api.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("rotate pooling key in Secret %s/%s: %w", qa.Namespace, name, err)
	}
	c.Recorder.Eventf(qa, corev1.EventTypeNormal, "PoolingKeyRotated", "wrote a new pooling key into Secret %s (annotation %s=%q); the previous key is kept as %q",
		name, RotatePoolingKeyAnnotation, rotation, sidecar.PoolPreviousKeyItem)
	return nil
}

// PoolingRules are the Role's rules: the sidecars find the front's replicas through
// its EndpointSlices, and need nothing else.
func PoolingRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}}}
}

// podServiceAccounts are the ServiceAccounts of pods, sorted ("default" for a pod that
// names none).
func podServiceAccounts(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		sa := p.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		out = append(out, sa)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (c *Controller) ensurePoolingRBAC(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, owner metav1.OwnerReference, pods []*corev1.Pod) error {
	name := sidecar.PoolingName(workload)
	ns := qa.Namespace
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: poolingLabels(workload), OwnerReferences: []metav1.OwnerReference{owner}},
		Rules:      PoolingRules(),
	}
	roles := c.Kube.RbacV1().Roles(ns)
	old, err := roles.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := roles.Create(ctx, role, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pooling Role %s/%s: %w", ns, name, err)
		}
	case err != nil:
		return fmt.Errorf("get pooling Role %s/%s: %w", ns, name, err)
	case !ownedBy(old, qa.UID):
		return notOwned("Role", ns, name, qa)
	case !equalRules(old.Rules, role.Rules):
		old = old.DeepCopy()
		old.Rules = role.Rules
		if _, err := roles.Update(ctx, old, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update pooling Role %s/%s: %w", ns, name, err)
		}
	}

	bindings := c.Kube.RbacV1().RoleBindings(ns)
	oldBinding, err := bindings.Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get pooling RoleBinding %s/%s: %w", ns, name, err)
	}
	accounts := podServiceAccounts(pods)
	if len(accounts) == 0 {
		// No pod to learn the ServiceAccount from (scaled to zero): keep the binding as
		// it is, or bind the namespace's default account that pods use unless told.
		if err == nil {
			return nil
		}
		accounts = []string{"default"}
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: poolingLabels(workload), OwnerReferences: []metav1.OwnerReference{owner}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
	for _, sa := range accounts {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa})
	}
	switch {
	case apierrors.IsNotFound(err):
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pooling RoleBinding %s/%s: %w", ns, name, err)
		}
	case !ownedBy(oldBinding, qa.UID):
		return notOwned("RoleBinding", ns, name, qa)
	case oldBinding.RoleRef != binding.RoleRef:
		// The role reference cannot change: replace the binding.
		if err := bindings.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &oldBinding.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replace pooling RoleBinding %s/%s: %w", ns, name, err)
		}
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pooling RoleBinding %s/%s: %w", ns, name, err)
		}
	case !slices.Equal(oldBinding.Subjects, binding.Subjects):
		oldBinding = oldBinding.DeepCopy()
		oldBinding.Subjects = binding.Subjects
		if _, err := bindings.Update(ctx, oldBinding, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update pooling RoleBinding %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

func equalRules(a, b []rbacv1.PolicyRule) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// FrontDeployment is the front Deployment for workload in ns, as the controller writes
// it (without owner and hash).
func FrontDeployment(ns, workload string, cfg FrontConfig) *appsv1.Deployment {
	yes, no := true, false
	uid := int64(65532)
	replicas := cfg.Replicas
	name := sidecar.FrontName(workload)
	podLabels := frontSelector(workload)
	// The collector scrapes the front like a sidecar (its label), and knows it as the
	// workload's front (FrontOfLabel); the webhook leaves it alone (annotation).
	podLabels[sidecar.InjectLabel] = sidecar.InjectValue
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range cfg.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	mode := int32(0o440)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: poolingLabels(workload)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: frontSelector(workload)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				// A rollout never takes a ready front away before its successor is ready.
				MaxUnavailable: ptrTo(intstr.FromInt32(0)), MaxSurge: ptrTo(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{
					sidecar.InjectedAnnotation:  "true",
					sidecar.AdminPortAnnotation: fmt.Sprint(cfg.AdminPort),
				}},
				Spec: corev1.PodSpec{
					// The front reads nothing from the API server.
					AutomountServiceAccountToken: &no,
					ImagePullSecrets:             pullSecrets,
					NodeSelector:                 cfg.NodeSelector,
					Tolerations:                  cfg.Tolerations,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: &yes, RunAsUser: &uid, FSGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					// Two replicas on one node fail together: prefer different nodes.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
							LabelSelector: &metav1.LabelSelector{MatchLabels: frontSelector(workload)}, TopologyKey: corev1.LabelHostname,
						}}},
					}},
					Containers: []corev1.Container{{
						Name:  FrontContainerName,
						Image: cfg.Image,
						Args: []string{
							"--mode=front",
							"--workload=" + workload,
							"--pool-secret-file=" + sidecar.PoolKeyPath,
							fmt.Sprintf("--listen=:%d", cfg.Port),
							fmt.Sprintf("--admin-listen=:%d", cfg.AdminPort),
						},
						Ports: []corev1.ContainerPort{
							{Name: sidecar.PoolPortName, ContainerPort: cfg.Port, Protocol: corev1.ProtocolTCP},
							{Name: sidecar.AdminPortName, ContainerPort: cfg.AdminPort, Protocol: corev1.ProtocolTCP},
						},
						Resources: *cfg.Resources.DeepCopy(),
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(sidecar.AdminPortName)},
						}},
						LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString(sidecar.AdminPortName)},
						}, PeriodSeconds: 10, FailureThreshold: 3},
						VolumeMounts: []corev1.VolumeMount{{Name: sidecar.PoolKeyVolume, MountPath: sidecar.PoolKeyDir, ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: &yes, RunAsUser: &uid, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{Name: sidecar.PoolKeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: sidecar.PoolingName(workload), DefaultMode: &mode,
					}}}},
				},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func (c *Controller) ensureFront(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, owner metav1.OwnerReference, cfg FrontConfig) (*appsv1.Deployment, error) {
	// The Deployment controller writes the object too (its revision annotation, its
	// status): an update that meets its write is tried again on a fresh read, as
	// client-go's controllers do, rather than failing the cycle.
	var dep *appsv1.Deployment
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		dep, err = c.ensureFrontOnce(ctx, qa, workload, owner, cfg)
		return err
	})
	return dep, err
}

// ensureFrontOnce reads the front Deployment and creates or updates it once.
func (c *Controller) ensureFrontOnce(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, owner metav1.OwnerReference, cfg FrontConfig) (*appsv1.Deployment, error) {
	want := FrontDeployment(qa.Namespace, workload, cfg)
	dep, change, err := ensureOwned(ctx, c.Kube.AppsV1().Deployments(qa.Namespace), qa, owner, "Deployment", want,
		func(up *appsv1.Deployment) { up.Labels, up.Spec = want.Labels, want.Spec })
	switch change {
	case ownedCreated:
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "FrontCreated", "created the front Deployment %s (%d replicas of %s)", want.Name, cfg.Replicas, cfg.Image)
	case ownedUpdated:
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "FrontUpdated", "updated the front Deployment %s", want.Name)
	}
	return dep, err
}

// ownedAPI is what ensureOwned needs of a typed client (Deployments, Services).
type ownedAPI[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// ownedObject is a typed API object (*appsv1.Deployment, *corev1.Service).
type ownedObject[T any] interface {
	metav1.Object
	DeepCopy() T
}

// ownedChange says what ensureOwned did.
type ownedChange int

const (
	ownedUnchanged ownedChange = iota
	ownedCreated
	ownedUpdated
)

// ensureOwned creates want (owned by qa), or, when the object of its name that qa
// owns was made from another version of want (PoolingHashAnnotation), updates a
// copy of it into which merge has copied what the controller owns (the rest, such
// as what the API server filled in, stays). An object of that name that qa does not
// own is an error. On a failed update it returns the object as it was.
func ensureOwned[T ownedObject[T]](ctx context.Context, api ownedAPI[T], qa *v1alpha1.QueueAutoscaler, owner metav1.OwnerReference,
	kind string, want T, merge func(up T)) (T, ownedChange, error) {
	var none T
	hash := hashOf(want)
	want.SetOwnerReferences([]metav1.OwnerReference{owner})
	want.SetAnnotations(map[string]string{PoolingHashAnnotation: hash})
	name := want.GetName()
	old, err := api.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		created, err := api.Create(ctx, want, metav1.CreateOptions{})
		if err != nil {
			return none, ownedUnchanged, fmt.Errorf("create front %s %s/%s: %w", kind, qa.Namespace, name, err)
		}
		return created, ownedCreated, nil
	case err != nil:
		return none, ownedUnchanged, fmt.Errorf("get front %s %s/%s: %w", kind, qa.Namespace, name, err)
	case !ownedBy(old, qa.UID):
		return none, ownedUnchanged, notOwned(kind, qa.Namespace, name, qa)
	case old.GetAnnotations()[PoolingHashAnnotation] == hash:
		return old, ownedUnchanged, nil
	}
	up := old.DeepCopy()
	merge(up)
	ann := up.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[PoolingHashAnnotation] = hash
	up.SetAnnotations(ann)
	updated, err := api.Update(ctx, up, metav1.UpdateOptions{})
	if err != nil {
		return old, ownedUnchanged, fmt.Errorf("update front %s %s/%s: %w", kind, qa.Namespace, name, err)
	}
	return updated, ownedUpdated, nil
}

// FrontService is the front's ClusterIP Service for workload in ns: its EndpointSlices
// are how sidecars find the front's ready replicas.
func FrontService(ns, workload string, cfg FrontConfig) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: sidecar.FrontName(workload), Namespace: ns, Labels: poolingLabels(workload)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: frontSelector(workload),
			Ports: []corev1.ServicePort{{
				Name: sidecar.PoolPortName, Port: cfg.Port, TargetPort: intstr.FromString(sidecar.PoolPortName), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
}

func (c *Controller) ensureFrontService(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string, owner metav1.OwnerReference, cfg FrontConfig) error {
	want := FrontService(qa.Namespace, workload, cfg)
	// Only what the controller owns changes; the cluster IP and the rest the API
	// server filled in stay.
	_, _, err := ensureOwned(ctx, c.Kube.CoreV1().Services(qa.Namespace), qa, owner, "Service", want, func(up *corev1.Service) {
		up.Labels = want.Labels
		up.Spec.Selector, up.Spec.Ports = want.Spec.Selector, want.Spec.Ports
	})
	return err
}

// removePooling deletes the pooling objects qa owns (routing is not pooled). Objects
// of those names it does not own are left alone.
func (c *Controller) removePooling(ctx context.Context, qa *v1alpha1.QueueAutoscaler, workload string) error {
	if len(workload) > sidecar.MaxPoolingWorkloadName {
		return nil // never pooled: no such objects
	}
	ns, pool, front := qa.Namespace, sidecar.PoolingName(workload), sidecar.FrontName(workload)
	type deleter struct {
		kind, name string
		get        func() (metav1.Object, error)
		del        func(metav1.DeleteOptions) error
	}
	kube := c.Kube
	all := []deleter{
		{"Deployment", front, func() (metav1.Object, error) {
			return kube.AppsV1().Deployments(ns).Get(ctx, front, metav1.GetOptions{})
		},
			func(o metav1.DeleteOptions) error { return kube.AppsV1().Deployments(ns).Delete(ctx, front, o) }},
		{"Service", front, func() (metav1.Object, error) { return kube.CoreV1().Services(ns).Get(ctx, front, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return kube.CoreV1().Services(ns).Delete(ctx, front, o) }},
		{"RoleBinding", pool, func() (metav1.Object, error) {
			return kube.RbacV1().RoleBindings(ns).Get(ctx, pool, metav1.GetOptions{})
		},
			func(o metav1.DeleteOptions) error { return kube.RbacV1().RoleBindings(ns).Delete(ctx, pool, o) }},
		{"Role", pool, func() (metav1.Object, error) { return kube.RbacV1().Roles(ns).Get(ctx, pool, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return kube.RbacV1().Roles(ns).Delete(ctx, pool, o) }},
		{"Secret", pool, func() (metav1.Object, error) { return kube.CoreV1().Secrets(ns).Get(ctx, pool, metav1.GetOptions{}) },
			func(o metav1.DeleteOptions) error { return kube.CoreV1().Secrets(ns).Delete(ctx, pool, o) }},
	}
	var errs []error
	removed := 0
	for _, d := range all {
		obj, err := d.get()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("get %s %s/%s: %w", d.kind, ns, d.name, err))
			continue
		}
		if !ownedBy(obj, qa.UID) {
			continue
		}
		uid := obj.GetUID()
		if err := d.del(metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s %s/%s: %w", d.kind, ns, d.name, err))
			continue
		}
		removed++
	}
	if removed > 0 {
		c.Recorder.Eventf(qa, corev1.EventTypeNormal, "PoolingRemoved", "routing is %q: removed %d pooling objects (front %s, Secret, Role and RoleBinding %s)", routingOf(qa), removed, front, pool)
	}
	return errors.Join(errs...)
}

func routingOf(qa *v1alpha1.QueueAutoscaler) string {
	if qa.Spec.Routing == "" {
		return "random"
	}
	return qa.Spec.Routing
}
