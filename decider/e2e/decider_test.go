package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/qas-dev/qas/decider/controller"
	"github.com/qas-dev/qas/decider/runner"
	"github.com/qas-dev/qas/internal/influx"
	"github.com/qas-dev/qas/internal/testenv/influxtest"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// leaseName is the decider's default --leader-election-id, the Lease that
// config/rbac's leader-election Role names.
const leaseName = "qas-decider"

// deciderRoles reads the decider's shipped RBAC: the ClusterRole and the namespaced
// leader-election Role of config/rbac.
func deciderRoles(t *testing.T) (rbacv1.ClusterRole, rbacv1.Role) {
	var cr rbacv1.ClusterRole
	var r rbacv1.Role
	for file, into := range map[string]any{"decider-clusterrole.yaml": &cr, "decider-leader-election-role.yaml": &r} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(), "config", "rbac", file))
		require.NoError(t, err)
		require.NoError(t, yaml.UnmarshalStrict(raw, into), file)
	}
	return cr, r
}

// deciderConfig binds the ServiceAccount qas-decider in ns to the shipped roles (the
// ClusterRole under a name of this namespace, the Role in ns) and returns a client
// configuration authenticating as it, whose requests rec records.
func deciderConfig(t *testing.T, c *kubetest.Cluster, ns string, rec *recorder) *rest.Config {
	ctx := context.Background()
	cs := c.Clientset()
	cr, role := deciderRoles(t)
	cr.Name = "qas-decider-" + ns
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{})
	require.NoError(t, err)
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "qas-decider"}},
	}
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{})
	})
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "qas-decider"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := c.ServiceAccountConfig(ctx, ns, "qas-decider")
	require.NoError(t, err)

	// RBAC reaches the authorizer through its informers: wait until both bindings
	// hold, so that no early request is refused for a reason the roles do not have.
	self, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Group: "qas.dev", Resource: "queueautoscalers", Verb: "list"},
		{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: ns, Name: leaseName},
	} {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			r, err := self.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
			return err == nil && r.Status.Allowed, nil
		})
		require.NoError(t, err, "the decider's roles never took effect for %+v", attrs)
	}
	cfg.Wrap(rec.wrap)
	return cfg
}

// call is one API request as RBAC sees it.
type call struct {
	Verb, Group, Resource, Subresource, Namespace, Name string
	// Path is set instead for non-resource requests (discovery, /version).
	Path string
}

func (c call) String() string {
	if c.Path != "" {
		return c.Verb + " " + c.Path
	}
	r := c.Resource
	if c.Subresource != "" {
		r += "/" + c.Subresource
	}
	if c.Group != "" {
		r += "." + c.Group
	}
	where := c.Namespace
	if c.Name != "" {
		where += "/" + c.Name
	}
	return fmt.Sprintf("%s %s %s", c.Verb, r, where)
}

// recorder records every request a client makes (client-go's WrapTransport) with the
// HTTP status it got.
type recorder struct {
	mu       sync.Mutex
	calls    map[call]int // count
	refusals map[call]int // 403s
}

func newRecorder() *recorder { return &recorder{calls: map[call]int{}, refusals: map[call]int{}} }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		c := parseRequest(req.Method, req.URL)
		refused := err == nil && resp.StatusCode == http.StatusForbidden && authorizationDenied(resp)
		r.mu.Lock()
		r.calls[c]++
		if refused {
			r.refusals[c]++
		}
		r.mu.Unlock()
		return resp, err
	})
}

// authorizationDenied reports whether a 403 is the authorizer's refusal ("User \"…\"
// cannot create resource …"), not another Forbidden such as an Event for a namespace
// that is being deleted ("unable to create new content in namespace … because it is
// being terminated"), which the deciders meet when an earlier test's namespace goes.
// The body is put back for the client.
func authorizationDenied(resp *http.Response) bool {
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return err != nil || bytes.Contains(body, []byte(`" cannot `))
}

func (r *recorder) snapshot() (calls, refusals []call) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.calls {
		calls = append(calls, c)
	}
	for c := range r.refusals {
		refusals = append(refusals, c)
	}
	less := func(s []call) func(i, j int) bool {
		return func(i, j int) bool { return s[i].String() < s[j].String() }
	}
	sort.Slice(calls, less(calls))
	sort.Slice(refusals, less(refusals))
	return calls, refusals
}

// parseRequest names a client-go request the way the apiserver's authorizer does:
// /api/v1/... is the core group, /apis/GROUP/VERSION/... a named one; then
// [namespaces/NS/]RESOURCE[/NAME[/SUBRESOURCE]]; GET is get with a name, list without
// and watch with ?watch=true.
func parseRequest(method string, u *url.URL) call {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, rest = parts[1], parts[3:]
	default:
		return call{Verb: strings.ToLower(method), Path: "/" + strings.Join(parts, "/")}
	}
	c := call{Group: group}
	if len(rest) >= 2 && rest[0] == "namespaces" && len(rest) != 2 {
		c.Namespace, rest = rest[1], rest[2:]
	}
	c.Resource = rest[0]
	if len(rest) > 1 {
		c.Name = rest[1]
	}
	if len(rest) > 2 {
		c.Subresource = rest[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			c.Verb = "watch"
		case c.Name == "":
			c.Verb = "list"
		default:
			c.Verb = "get"
		}
	case http.MethodPost:
		c.Verb = "create"
	case http.MethodPut:
		c.Verb = "update"
	case http.MethodPatch:
		c.Verb = "patch"
	case http.MethodDelete:
		c.Verb = "delete"
		if c.Name == "" {
			c.Verb = "deletecollection"
		}
	default:
		c.Verb = strings.ToLower(method)
	}
	return c
}

// deciderProc is one `qas-decider run` replica, in process.
type deciderProc struct {
	identity string
	cancel   context.CancelFunc
	done     chan error
}

// startDecider runs a replica with leader election on the Lease leaseName in ns,
// reading and writing db, as cfg's identity.
func startDecider(t *testing.T, cfg *rest.Config, ns string, db *influxtest.Server, identity string) *deciderProc {
	o := runner.Options{
		Influx: influx.Options{URL: db.URL, Bucket: influxtest.Bucket}, Interval: 2 * time.Second, Window: time.Minute, MaxPodAge: 10 * time.Second,
		Workers:     controller.DefaultWorkers,
		LeaderElect: true, LeaseNamespace: ns, LeaseName: leaseName, Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		MetricsListen: "127.0.0.1:0",
	}
	require.NoError(t, o.Validate())
	ctx, cancel := context.WithCancel(context.Background())
	d := &deciderProc{identity: identity, cancel: cancel, done: make(chan error, 1)}
	go func() { d.done <- runner.Run(ctx, o, cfg, zaptest.NewLogger(t).Named(identity)) }()
	t.Cleanup(d.stop)
	return d
}

func (d *deciderProc) stop() {
	if d.cancel != nil {
		d.cancel()
		<-d.done //nolint:errcheck // waits for the end; the error is the cancellation
		d.cancel = nil
	}
}

// leader returns the Lease's holder ("" when none).
func leader(ctx context.Context, kube kubernetes.Interface, ns string) string {
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, what)
}
