// Package kubetest starts a real Kubernetes control plane on loopback for integration and
// end-to-end tests: etcd, kube-apiserver and, on request, kube-scheduler,
// kube-controller-manager and kwok (a fake kubelet that makes pods Ready without
// running containers). The binaries come from test/infra/need-kubernetes.sh, which
// builds them once into a cache and exports QAS_KUBE_BIN and QAS_KWOK.
//
// A cluster takes several seconds to start, so a test package normally shares one
// through Main and Shared and isolates its tests with Namespace.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qas-dev/qas/internal/testenv"
)

// Options chooses which components run besides etcd and kube-apiserver.
type Options struct {
	// Scheduler runs kube-scheduler, so pods get bound to nodes.
	Scheduler bool
	// ControllerManager runs kube-controller-manager (Deployments, ReplicaSets,
	// garbage collection, the default ServiceAccount).
	ControllerManager bool
	// Kwok runs kwok, which manages nodes annotated kwok.x-k8s.io/node=fake and drives
	// their pods through Ready, in-place resize and deletion.
	Kwok bool
	// PodReadyDelay makes kwok wait this long before marking a new pod Ready, to model
	// pod start-up time.
	PodReadyDelay time.Duration
	// Nodes are kwok nodes created once the cluster is up (requires Kwok).
	Nodes []NodeSpec
	// ExtraAPIServerFlags are appended to kube-apiserver's command line.
	ExtraAPIServerFlags []string
}

// Full runs every component with two 16-core kwok nodes: what a Deployment needs to
// get Ready pods.
func Full() Options {
	return Options{Scheduler: true, ControllerManager: true, Kwok: true, Nodes: []NodeSpec{
		{Name: "kwok-node-1", CPU: "16", Memory: "64Gi"},
		{Name: "kwok-node-2", CPU: "16", Memory: "64Gi"},
	}}
}

// Cluster is a running control plane.
type Cluster struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file with the same credentials, for
	// kubectl and helm.
	Kubeconfig string
	// Dir holds the PKI, the data and every component's log.
	Dir string
	// CACert is the PEM of the CA that signed the apiserver's serving certificate.
	CACert []byte

	binDir, kwokBin string
	opts            Options
	clientset       kubernetes.Interface
	procs           []*process // in start order
	stopOnce        sync.Once
}

// Start starts a cluster whose files live in dir, using the Kubernetes binaries in
// binDir and kwok at kwokBin (empty unless opts.Kwok). On error everything it started
// is stopped again.
func Start(ctx context.Context, binDir, kwokBin, dir string, opts Options) (*Cluster, error) {
	if opts.Kwok && kwokBin == "" {
		return nil, errors.New("kubetest: Options.Kwok needs the kwok binary")
	}
	if len(opts.Nodes) > 0 && !opts.Kwok {
		return nil, errors.New("kubetest: Options.Nodes needs Options.Kwok")
	}
	c := &Cluster{Dir: dir, binDir: binDir, kwokBin: kwokBin, opts: opts}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%w%s", err, c.logTails())
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	dir, opts := c.Dir, c.opts
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	token, err := c.writePKI(pki)
	if err != nil {
		return fmt.Errorf("kubetest: pki: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx, pki, token); err != nil {
		return err
	}
	if opts.Scheduler {
		if err := c.startScheduler(); err != nil {
			return err
		}
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(pki); err != nil {
			return err
		}
	}
	if opts.Kwok {
		if err := c.startKwok(); err != nil {
			return err
		}
		for _, n := range opts.Nodes {
			if err := c.AddNode(ctx, n); err != nil {
				return err
			}
		}
	}
	if opts.ControllerManager {
		if err := c.waitDefaultServiceAccount(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Stop stops every component in reverse start order (kwok, controller-manager,
// scheduler, apiserver, etcd: the apiserver hangs on SIGTERM if etcd goes first). It is
// safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].Stop(15 * time.Second)
		}
	})
}

// PIDs returns the process ids of the components, for tests that check Stop.
func (c *Cluster) PIDs() []int {
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.Pid())
	}
	return pids
}

func (c *Cluster) writePKI(dir string) (token string, err error) {
	ca, err := newCA("qas-kubetest-ca")
	if err != nil {
		return "", err
	}
	serving, err := ca.issue("kube-apiserver", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return "", err
	}
	frontCA, err := newCA("qas-kubetest-front-proxy-ca")
	if err != nil {
		return "", err
	}
	frontClient, err := frontCA.issue("front-proxy-client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return "", err
	}
	for name, kp := range map[string]keyPair{"ca": ca, "apiserver": serving, "front-proxy-ca": frontCA, "front-proxy-client": frontClient} {
		if err := kp.write(dir, name); err != nil {
			return "", err
		}
	}
	if err := writeServiceAccountKeys(dir); err != nil {
		return "", err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	token = hex.EncodeToString(b)
	tokens := token + ",admin,admin-uid,system:masters\n"
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return "", err
	}
	c.CACert = ca.certPEM()
	return token, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client, peer, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer[0])
	p, err := c.run("etcd", filepath.Join(c.binDir, "etcd"),
		"--name=default", "--data-dir="+filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return err
	}
	p.url = clientURL
	// Another package's etcd can hold the port picked for this one and answer
	// /health: only this process's own listener makes it ready.
	return waitHTTP(ctx, p, "", func(ctx context.Context) error {
		ours, err := p.Listens(client[0])
		if err != nil {
			return err
		}
		if !ours {
			return fmt.Errorf("etcd does not listen on %d yet", client[0])
		}
		return httpOK(ctx, clientURL+"/health")
	})
}

func (c *Cluster) etcdURL() string { return c.procs[0].url }

func (c *Cluster) startAPIServer(ctx context.Context, pki, token string) error {
	ports, _, err := freePorts(1)
	if err != nil {
		return err
	}
	port := strconv.Itoa(ports[0])
	host := "https://127.0.0.1:" + port
	f := func(name string) string { return filepath.Join(pki, name) }
	args := []string{
		"--etcd-servers=" + c.etcdURL(),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + port,
		"--tls-cert-file=" + f("apiserver.crt"), "--tls-private-key-file=" + f("apiserver.key"),
		"--client-ca-file=" + f("ca.crt"), "--token-auth-file=" + f("tokens.csv"),
		"--service-account-issuer=" + host, "--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
		"--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount",
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		// The aggregation layer: lets tests serve metrics.k8s.io and other APIs.
		"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f("front-proxy-client.crt"),
		"--proxy-client-key-file=" + f("front-proxy-client.key"),
	}
	args = append(args, c.opts.ExtraAPIServerFlags...)
	p, err := c.run("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), args...)
	if err != nil {
		return err
	}
	p.url = host
	c.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CACert},
		QPS:             200,
		Burst:           400,
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: kubetest
  context:
    cluster: kubetest
    user: admin
current-context: kubetest
`, host, f("ca.crt"), token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		return err
	}
	if c.clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	return waitHTTP(ctx, p, "", c.apiserverReady)
}

// componentArgs are the flags kube-scheduler and kube-controller-manager share.
// Neither serves HTTPS (--secure-port=0): nothing here reads their health or
// metrics, and a port picked free a moment before the process binds it can be
// taken in between by another test's listener (make test runs packages in
// parallel); kube-controller-manager then exited, "bind: address already in
// use", and every test on the shared cluster failed a minute later waiting for
// the default ServiceAccount.
func (c *Cluster) componentArgs() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig, "--leader-elect=false",
		"--secure-port=0",
	}
}

func (c *Cluster) startScheduler() error {
	_, err := c.run("kube-scheduler", filepath.Join(c.binDir, "kube-scheduler"), c.componentArgs()...)
	return err
}

func (c *Cluster) startControllerManager(pki string) error {
	args := append(c.componentArgs(),
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--use-service-account-credentials=false",
		"--service-cluster-ip-range=10.0.0.0/24",
		// Scale decisions in tests should show at once, not after the default 5 minutes.
		"--horizontal-pod-autoscaler-sync-period=5s",
	)
	_, err := c.run("kube-controller-manager", filepath.Join(c.binDir, "kube-controller-manager"), args...)
	return err
}

func (c *Cluster) waitDefaultServiceAccount(ctx context.Context) error {
	return poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := c.clientset.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// process is one running component, its output in <Dir>/<name>.log.
type process struct {
	*testenv.Process
	logPath string
	url     string
	bin     string
	args    []string
}

func (c *Cluster) run(name, bin string, args ...string) (*process, error) {
	// If the test binary dies without cleaning up (a panic or a -timeout), the kernel
	// still kills the component (testenv.Process), so no stray process keeps a port or
	// etcd's data.
	logPath := filepath.Join(c.Dir, name+".log")
	tp, err := testenv.StartProcessLog(name, bin, args, nil, logPath)
	if err != nil {
		return nil, fmt.Errorf("kubetest: start %s: %w", name, err)
	}
	p := &process{Process: tp, logPath: logPath, bin: bin, args: args}
	c.procs = append(c.procs, p)
	return p, nil
}

// KillAPIServer kills kube-apiserver at once (SIGKILL: no drain, open watches and
// requests cut), as a crashed apiserver; etcd and the other components keep running.
// StartAPIServer starts it again.
func (c *Cluster) KillAPIServer() error {
	p := c.proc("kube-apiserver")
	if p == nil {
		return errors.New("kubetest: no kube-apiserver")
	}
	p.Kill()
	return nil
}

// StartAPIServer starts kube-apiserver again after KillAPIServer, on the same address
// with the same flags and state (etcd), and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	for i, p := range c.procs {
		if p.Name != "kube-apiserver" {
			continue
		}
		if exited, _ := p.Exited(); !exited {
			return errors.New("kubetest: kube-apiserver is running")
		}
		tp, err := testenv.StartProcessLog(p.Name, p.bin, p.args, nil, p.logPath)
		if err != nil {
			return fmt.Errorf("kubetest: restart kube-apiserver: %w", err)
		}
		np := &process{Process: tp, logPath: p.logPath, url: p.url, bin: p.bin, args: p.args}
		c.procs[i] = np
		return waitHTTP(ctx, np, "", c.apiserverReady)
	}
	return errors.New("kubetest: no kube-apiserver")
}

// apiserverReady checks kube-apiserver's /readyz.
func (c *Cluster) apiserverReady(ctx context.Context) error {
	body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if !bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
		return fmt.Errorf("readyz: %s", body)
	}
	return nil
}

func (c *Cluster) proc(name string) *process {
	for _, p := range c.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (p *process) exited() error {
	if exited, err := p.Exited(); exited {
		return fmt.Errorf("kubetest: %s exited: %w (log %s)", p.Name, err, p.logPath)
	}
	return nil
}

// waitHTTP waits until check (or a plain GET of url answering 200) succeeds, failing
// early if the process exits.
func waitHTTP(ctx context.Context, p *process, url string, check func(context.Context) error) error {
	if check == nil {
		check = func(ctx context.Context) error { return httpOK(ctx, url) }
	}
	var last error
	err := poll(ctx, 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("kubetest: %s not ready: %w (last: %w)", p.Name, err, last)
	}
	return err
}

func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, cond)
}

// logTails returns the end of every component's log, for error messages.
func (c *Cluster) logTails() string {
	var b bytes.Buffer
	for _, p := range c.procs {
		data := p.Output()
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "\n--- %s (%s) ---\n%s", p.Name, p.logPath, data)
	}
	return b.String()
}

// freePorts returns n loopback ports that were free a moment ago, in two groups so
// callers can tell them apart; the second group has the same size.
func freePorts(n int) (first, second []int, err error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < 2*n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if i < n {
			first = append(first, port)
		} else {
			second = append(second, port)
		}
	}
	return first, second, nil
}

// Toleration is the toleration a pod needs to be scheduled on a kwok node.
func Toleration() corev1.Toleration {
	return corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}
