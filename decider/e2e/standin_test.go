package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/qas-dev/qas/decider/inject"
	"github.com/qas-dev/qas/internal/testenv"
	"github.com/qas-dev/qas/proxy/sidecar"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// standInCommands are what a pod's containers run: the real qas-proxy and
// qas-example-app, built once per test binary.
var standInCommands = &testenv.Commands{Packages: []string{
	"github.com/qas-dev/qas/proxy/cmd/qas-proxy", "github.com/qas-dev/qas/examples/app/cmd/qas-example-app",
}}

// buildBinaries returns the stand-ins' binaries by name.
func buildBinaries(t *testing.T) map[string]string {
	dir := standInCommands.Dir(t)
	return map[string]string{"qas-proxy": filepath.Join(dir, "qas-proxy"), "qas-example-app": filepath.Join(dir, "qas-example-app")}
}

// stopGrace is how long a stand-in may take to exit after SIGTERM (qas-proxy drains
// first) before it is killed.
const stopGrace = time.Minute

// standIns runs, for every pod of a workload that the scheduler placed, what its
// containers would run: the real qas-example-app and the real qas-proxy, as local
// processes on free loopback ports, with the arguments and environment the webhook
// injected (each pod port mapped to a loopback port). Each pod is annotated with its
// proxy's /stats URL (sidecar.StatsURLAnnotation), which is how the collector maps a
// kwok pod to the process standing in for its sidecar. Load goes to the proxies of
// Ready pods, as a Service routes.
type standIns struct {
	t        *testing.T
	kube     kubernetes.Interface
	ns, sel  string
	bins     map[string]string
	mu       sync.Mutex
	pods     map[string]*podProcs
	all      []*testenv.Process
	stopping sync.WaitGroup
}

type podProcs struct {
	serving string // the proxy's serving URL
	ready   bool
	procs   []*testenv.Process
}

func newStandIns(t *testing.T, kube kubernetes.Interface, ns, selector string, bins map[string]string) *standIns {
	s := &standIns{t: t, kube: kube, ns: ns, sel: selector, bins: bins, pods: map[string]*podProcs{}}
	t.Cleanup(s.stopAll)
	return s
}

// sync starts processes for new pods, stops those of pods that went, and notes which
// pods are Ready.
func (s *standIns) sync(ctx context.Context) error {
	list, err := s.kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: s.sel})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
			continue
		}
		seen[pod.Name] = true
		s.mu.Lock()
		pp, ok := s.pods[pod.Name]
		s.mu.Unlock()
		if !ok {
			if pp, err = s.start(ctx, pod); err != nil {
				return fmt.Errorf("pod %s: %w", pod.Name, err)
			}
			s.mu.Lock()
			s.pods[pod.Name] = pp
			s.mu.Unlock()
		}
		s.mu.Lock()
		pp.ready = podReady(pod)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, pp := range s.pods {
		if !seen[name] {
			delete(s.pods, name)
			for _, p := range pp.procs {
				s.stopping.Add(1)
				go func() { defer s.stopping.Done(); p.Stop(stopGrace) }()
			}
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hostPortArg matches a flag whose value is [host]:port.
var hostPortArg = regexp.MustCompile(`^(--?[a-z-]+=)([^:=]*):([0-9]+)$`)

// start runs the pod's containers. The app container is the one whose command is
// qas-example-app, the sidecar the qas-proxy container the webhook added.
func (s *standIns) start(ctx context.Context, pod *corev1.Pod) (*podProcs, error) {
	local := map[string]int{} // pod port → loopback port
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			local[strconv.Itoa(int(p.ContainerPort))] = testenv.FreePort(s.t)
		}
	}
	mapArg := func(a string) string {
		m := hostPortArg.FindStringSubmatch(a)
		if m == nil {
			return a
		}
		if port, ok := local[m[3]]; ok {
			return fmt.Sprintf("%s127.0.0.1:%d", m[1], port)
		}
		return a
	}
	pp := &podProcs{}
	var admin int
	for _, role := range []string{"app", sidecar.ContainerName} { // the app first: the proxy's readiness needs it
		for _, c := range pod.Spec.Containers {
			bin, args := "", []string{}
			switch {
			case role == sidecar.ContainerName && c.Name == sidecar.ContainerName:
				bin = s.bins["qas-proxy"] // the image's entrypoint; the webhook sets only args
			case role == "app" && c.Name != sidecar.ContainerName && len(c.Command) > 0 && filepath.Base(c.Command[0]) == "qas-example-app":
				bin = s.bins["qas-example-app"]
				args = append(args, c.Command[1:]...)
			default:
				continue
			}
			var env []string
			for _, e := range c.Env {
				v := e.Value
				if port, ok := local[v]; ok && e.Name == inject.EnvAppPort {
					v = strconv.Itoa(port)
				}
				env = append(env, e.Name+"="+v)
			}
			for _, a := range c.Args {
				args = append(args, mapArg(a))
				if strings.HasPrefix(a, "--admin-listen=") {
					_, port, _ := net.SplitHostPort(strings.TrimPrefix(a, "--admin-listen="))
					admin = local[port]
				}
				if strings.HasPrefix(a, "--listen=") && c.Name == sidecar.ContainerName {
					_, port, _ := net.SplitHostPort(strings.TrimPrefix(a, "--listen="))
					pp.serving = fmt.Sprintf("http://127.0.0.1:%d", local[port])
				}
			}
			p, err := testenv.StartProcess(pod.Name+"/"+c.Name, bin, args, env)
			if err != nil {
				return nil, err
			}
			s.mu.Lock()
			s.all = append(s.all, p)
			s.mu.Unlock()
			pp.procs = append(pp.procs, p)
		}
	}
	if len(pp.procs) != 2 || admin == 0 || pp.serving == "" {
		for _, p := range pp.procs {
			p.Stop(stopGrace)
		}
		return nil, fmt.Errorf("want an app container running qas-example-app and an injected %s with --listen and --admin-listen: %+v", sidecar.ContainerName, pod.Spec.Containers)
	}
	// Ready when the proxy reaches the app (its /readyz dials the upstream).
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", admin)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(readyz)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		for _, p := range pp.procs {
			if exited, err := p.Exited(); exited {
				return nil, fmt.Errorf("%s exited (%w): %s", p.Name, err, p.Output())
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the proxy never became ready: " + pp.procs[1].Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"http://127.0.0.1:%d/stats"}}}`, sidecar.StatsURLAnnotation, admin)
	if _, err := s.kube.CoreV1().Pods(s.ns).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		for _, p := range pp.procs {
			p.Stop(stopGrace)
		}
		return nil, err
	}
	return pp, nil
}

// targets are the serving URLs of the Ready pods' proxies.
func (s *standIns) targets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, pp := range s.pods {
		if pp.ready {
			out = append(out, pp.serving)
		}
	}
	return out
}

// stopAll stops every process and checks that none is left running.
func (s *standIns) stopAll() {
	s.mu.Lock()
	all := append([]*testenv.Process(nil), s.all...)
	s.pods = map[string]*podProcs{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(stopGrace) }()
	}
	wg.Wait()
	s.stopping.Wait()
	for _, p := range all {
		if exited, _ := p.Exited(); !exited {
			s.t.Errorf("process %s (pid %d) still runs", p.Name, p.Pid())
		}
	}
}

// started is the number of processes started so far.
func (s *standIns) started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}
