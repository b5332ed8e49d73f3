package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSpec describes a kwok fake node.
type NodeSpec struct {
	Name   string
	CPU    string // a quantity, e.g. "16"
	Memory string // a quantity, e.g. "64Gi"
	// EphemeralStorage is the node's local storage for emptyDir volumes and
	// container writable layers, e.g. "100Gi"; empty reports none.
	EphemeralStorage string
	Labels           map[string]string
}

// kwokStagesDir finds the stage YAMLs shipped in kwok's module: next to the binary
// (where need-kubernetes.sh may copy them) or in the Go module cache.
func kwokStagesDir() (string, error) {
	if d := os.Getenv("QAS_KWOK_STAGES"); d != "" {
		return d, nil
	}
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, _ := os.UserHomeDir()
			gopath = filepath.Join(home, "go")
		}
		modcache = filepath.Join(gopath, "pkg", "mod")
	}
	d := filepath.Join(modcache, "sigs.k8s.io", "kwok@v0.8.0", "kustomize", "stage")
	if _, err := os.Stat(d); err != nil {
		return "", fmt.Errorf("kubetest: kwok stages not found at %s (set QAS_KWOK_STAGES): %w", d, err)
	}
	return d, nil
}

// podResizeStage follows in-place resizes: when a running pod's spec resources differ
// from its container statuses, it copies them over and reports the new generation as
// observed, as a kubelet does once a resize is actuated.
const podResizeStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-resize
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '[.spec.containers[].resources] == [.status.containerStatuses[].resources]'
      operator: 'In'
      values:
      - 'false'
  next:
    statusTemplate: |
      {{ $now := Now }}
      observedGeneration: {{ .metadata.generation }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: true
        restartCount: 0
        resources: {{ .resources | toJson }}
        state:
          running:
            startedAt: {{ $now | Quote }}
      {{ end }}
`

// kwokStages assembles kwok's stage file: fast node initialisation with lease
// heartbeats, and the fast pod lifecycle, with two changes. pod-ready copies container
// resources into the container statuses (the apiserver accepts pods/resize only for
// pods whose statuses carry them) and waits readyDelay; pod-resize follows resizes.
func kwokStages(readyDelay time.Duration) (string, error) {
	dir, err := kwokStagesDir()
	if err != nil {
		return "", err
	}
	var docs []string
	for _, f := range []string{
		"node/fast/node-initialize.yaml",
		"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
		"pod/fast/pod-ready.yaml",
		"pod/fast/pod-complete.yaml",
		"pod/fast/pod-delete.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("kubetest: kwok stage: %w", err)
		}
		doc := string(data)
		if strings.HasSuffix(f, "pod-ready.yaml") {
			if doc, err = patchPodReady(doc, readyDelay); err != nil {
				return "", err
			}
		}
		docs = append(docs, strings.TrimSpace(doc))
	}
	docs = append(docs, strings.TrimSpace(podResizeStage))
	return strings.Join(docs, "\n---\n") + "\n", nil
}

func patchPodReady(doc string, readyDelay time.Duration) (string, error) {
	const anchor = "        name: {{ .name | Quote }}\n        ready: true\n"
	i := strings.Index(doc, anchor)
	if i < 0 {
		return "", errors.New("kubetest: kwok pod-ready stage changed shape: container status anchor not found")
	}
	i += len(anchor)
	doc = doc[:i] + "        resources: {{ .resources | toJson }}\n" + doc[i:]
	if readyDelay > 0 {
		const next = "  next:\n"
		j := strings.Index(doc, next)
		if j < 0 {
			return "", errors.New("kubetest: kwok pod-ready stage changed shape: next not found")
		}
		delay := fmt.Sprintf("  delay:\n    durationMilliseconds: %d\n", readyDelay.Milliseconds())
		doc = doc[:j] + delay + doc[j:]
	}
	return doc, nil
}

func (c *Cluster) startKwok() error {
	stages, err := kwokStages(c.opts.PodReadyDelay)
	if err != nil {
		return err
	}
	path := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(path, []byte(stages), 0o600); err != nil {
		return err
	}
	ports, _, err := freePorts(1)
	if err != nil {
		return err
	}
	_, err = c.run("kwok", c.kwokBin,
		"--kubeconfig="+c.Kubeconfig, "--config="+path,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// Fake addresses written into node and pod status; kwok sends no traffic to them.
		"--node-ip=10.0.0.1", "--cidr=10.0.0.1/24",
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:"+strconv.Itoa(ports[0]))
	return err
}

// AddNode creates a kwok fake node and waits until kwok reports it Ready.
func (c *Cluster) AddNode(ctx context.Context, spec NodeSpec) error {
	if spec.CPU == "" {
		spec.CPU = "16"
	}
	if spec.Memory == "" {
		spec.Memory = "64Gi"
	}
	cpu, err := resource.ParseQuantity(spec.CPU)
	if err != nil {
		return fmt.Errorf("kubetest: node %s cpu: %w", spec.Name, err)
	}
	mem, err := resource.ParseQuantity(spec.Memory)
	if err != nil {
		return fmt.Errorf("kubetest: node %s memory: %w", spec.Name, err)
	}
	labels := map[string]string{"kubernetes.io/hostname": spec.Name, "type": "kwok"}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: resource.MustParse("110"),
	}
	if spec.EphemeralStorage != "" {
		eph, err := resource.ParseQuantity(spec.EphemeralStorage)
		if err != nil {
			return fmt.Errorf("kubetest: node %s ephemeral storage: %w", spec.Name, err)
		}
		capacity[corev1.ResourceEphemeralStorage] = eph
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        spec.Name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
	if _, err := c.clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: create node %s: %w", spec.Name, err)
	}
	return poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		n, err := c.clientset.CoreV1().Nodes().Get(ctx, spec.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// httpOK succeeds when a GET of url answers 200.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
