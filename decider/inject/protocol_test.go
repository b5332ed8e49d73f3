package inject

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/qas-dev/qas/proxy/sidecar"
)

// TestUpstreamProtocol: the sidecar speaks h2c to the app when the serving port says
// the app speaks HTTP/2 cleartext, by Knative's and Istio's port names or by the
// appProtocol annotation, and HTTP/1.1 otherwise.
func TestUpstreamProtocol(t *testing.T) {
	for _, tc := range []struct {
		port       string // the serving port's name
		annotation string // qas.dev/app-protocol, if not empty
		h2c        bool
	}{
		{port: "http"},
		{port: "web"},
		{port: "h2c", h2c: true},
		{port: "grpc", h2c: true},
		{port: "grpc-api", h2c: true},
		{port: "http2", h2c: true},
		{port: "http2-web", h2c: true},
		{port: "grpc-web"},
		{port: "grpc-web-ui"},
		{port: "h2c-x"},
		{port: "grpcx"},
		{port: "http", annotation: "kubernetes.io/h2c", h2c: true},
		{port: "http", annotation: "grpc", h2c: true},
		{port: "grpc", annotation: "http"},
		{port: "h2c", annotation: "kubernetes.io/ws"},
	} {
		t.Run(tc.port+" "+tc.annotation, func(t *testing.T) {
			pod := appPod(func(p *corev1.Pod) {
				p.Spec.Containers[0].Ports[0].Name = tc.port
				p.Annotations = map[string]string{AnnotationPort: tc.port}
				if tc.annotation != "" {
					p.Annotations[AnnotationAppProtocol] = tc.annotation
				}
			})
			got, res := apply(t, DefaultConfig(), pod)
			require.Empty(t, res.Skip)
			proxy := container(got, sidecar.ContainerName)
			want := []string{"--listen=:8080", "--admin-listen=:9901", "--upstream=127.0.0.1:18080", "--drain=5s", "--shutdown-timeout=23s"}
			if tc.h2c {
				want = append(want, "--upstream-protocol=h2c")
			}
			require.Equal(t, want, proxy.Args)
			require.Equal(t, tc.port, proxy.Ports[0].Name, "the proxy takes over the port's name")
		})
	}
}
