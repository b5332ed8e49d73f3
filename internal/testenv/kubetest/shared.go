package kubetest

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/internal/testenv"
)

// StartT starts a cluster for one test (or benchmark) and stops it in t.Cleanup. It
// skips, or fails under `make test`, when the binaries are not installed.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	bin := testenv.Tool(t, "QAS_KUBE_BIN")
	kwok := ""
	if opts.Kwok {
		kwok = testenv.Tool(t, "QAS_KWOK")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, bin, kwok, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

var shared struct {
	mu      sync.Mutex
	opts    Options
	dir     string
	cluster *Cluster
	err     error
	started bool
}

// Main runs a test package's tests with one cluster shared by every test that calls
// Shared; the cluster starts on first use and stops when the tests end, and the
// binaries testenv.Commands built go with it. Call it from
// TestMain: func TestMain(m *testing.M) { kubetest.Main(m, kubetest.Full()) }.
func Main(m *testing.M, opts Options) {
	shared.opts = opts
	code := m.Run()
	testenv.RemoveCommands()
	shared.mu.Lock()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" && code == 0 {
		os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// Shared returns the package's shared cluster (see Main), starting it on first use.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	bin := testenv.Tool(t, "QAS_KUBE_BIN")
	kwok := ""
	if shared.opts.Kwok {
		kwok = testenv.Tool(t, "QAS_KWOK")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		dir, err := os.MkdirTemp("", "kubetest-")
		if err != nil {
			shared.err = err
		} else {
			shared.dir = dir
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			shared.cluster, shared.err = Start(ctx, bin, kwok, dir, shared.opts)
			cancel()
		}
	}
	if shared.err != nil {
		t.Fatalf("shared cluster (kept in %s): %v", shared.dir, shared.err)
	}
	return shared.cluster
}

// Namespace creates a namespace for the calling test and deletes it afterwards.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, name)
	if len(name) > 40 {
		name = name[:40]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(name, "-") + "-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.clientset.CoreV1().Namespaces().Delete(ctx, created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}
