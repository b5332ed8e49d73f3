package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// APIServiceNamespace holds the Services that route aggregated APIs to test servers.
const APIServiceNamespace = "kubetest-apiservices"

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// RegisterAPIService serves group/version of the Kubernetes API from handler, through
// the apiserver's aggregation layer, and waits until the APIService is Available. The
// handler must answer discovery (GET /apis/group/version) as well as the resources.
//
// Endpoints may not point at loopback addresses and the apiserver will not proxy to
// them, but the aggregator resolves an ExternalName Service to https://name:port, so the
// Service names "localhost" and the port of a TLS test server on 127.0.0.1. The returned
// server is closed (and the APIService deleted) by the returned stop function.
func (c *Cluster) RegisterAPIService(ctx context.Context, group, version string, handler http.Handler) (stop func(), err error) {
	srv := httptest.NewTLSServer(handler)
	port := srv.Listener.Addr().(interface{ String() string })
	_, portStr, err := splitHostPort(port.String())
	if err != nil {
		srv.Close()
		return nil, err
	}
	portNum, _ := strconv.Atoi(portStr)
	cs := c.clientset
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: APIServiceNamespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		srv.Close()
		return nil, err
	}
	name := fmt.Sprintf("%s-%s", version, sanitize(group))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: APIServiceNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(portNum)}},
		},
	}
	_ = cs.CoreV1().Services(APIServiceNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	if _, err := cs.CoreV1().Services(APIServiceNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("kubetest: service for %s/%s: %w", group, version, err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		srv.Close()
		return nil, err
	}
	apiSvcName := version + "." + group
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": apiSvcName},
		"spec": map[string]any{
			"group": group, "version": version,
			"service":               map[string]any{"namespace": APIServiceNamespace, "name": name, "port": int64(portNum)},
			"insecureSkipTLSVerify": true,
			"groupPriorityMinimum":  int64(100),
			"versionPriority":       int64(100),
		},
	}}
	_ = dyn.Resource(apiServiceGVR).Delete(ctx, apiSvcName, metav1.DeleteOptions{})
	if _, err := dyn.Resource(apiServiceGVR).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		srv.Close()
		return nil, fmt.Errorf("kubetest: APIService %s: %w", apiSvcName, err)
	}
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = dyn.Resource(apiServiceGVR).Delete(ctx, apiSvcName, metav1.DeleteOptions{})
		_ = cs.CoreV1().Services(APIServiceNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		srv.Close()
	}
	var lastReason string
	err = poll(ctx, 60*time.Second, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(apiServiceGVR).Get(ctx, apiSvcName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, raw := range conds {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Available" {
				lastReason = fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
				return cond["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		stop()
		return nil, fmt.Errorf("kubetest: APIService %s not available (%s): %w", apiSvcName, lastReason, err)
	}
	return stop, nil
}

func sanitize(group string) string {
	b := []byte(group)
	for i, ch := range b {
		if ch == '.' {
			b[i] = '-'
		}
	}
	return string(b)
}
