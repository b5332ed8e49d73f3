package inject

import (
	"fmt"
	"strings"
)

// AnnotationAppProtocol declares the application protocol of the serving port, with
// the values of a Service port's appProtocol: "kubernetes.io/h2c" or "grpc" (HTTP/2
// cleartext with prior knowledge), "http" or "kubernetes.io/ws" (HTTP/1.1). A
// container port has no appProtocol field of its own, so the pod says it here; it
// overrides what the port's name says (see upstreamH2C).
const AnnotationAppProtocol = "qas.dev/app-protocol"

// appProtocols maps AnnotationAppProtocol's values to whether the app speaks h2c.
var appProtocols = map[string]bool{"kubernetes.io/h2c": true, "grpc": true, "http": false, "kubernetes.io/ws": false}

// upstreamH2C reports whether the proxy must speak HTTP/2 cleartext to the app
// (qas-proxy --upstream-protocol=h2c) for a serving port named name, or why the pod's
// AnnotationAppProtocol is not understood. Without the annotation the port name
// decides, by Knative's convention (a port named h2c) and Istio's
// (<protocol>[-<suffix>] with protocol grpc or http2; grpc-web is HTTP/1.1
// compatible, as browsers speak it).
func upstreamH2C(annotations map[string]string, name string) (bool, string) {
	if v, ok := annotations[AnnotationAppProtocol]; ok {
		h2c, known := appProtocols[v]
		if !known {
			return false, fmt.Sprintf("annotation %s=%q is not one of kubernetes.io/h2c, grpc, http, kubernetes.io/ws", AnnotationAppProtocol, v)
		}
		return h2c, ""
	}
	if name == "grpc-web" || strings.HasPrefix(name, "grpc-web-") {
		return false, ""
	}
	protocol, _, _ := strings.Cut(name, "-")
	return name == "h2c" || protocol == "grpc" || protocol == "http2", ""
}
