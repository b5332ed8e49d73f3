// Package sidecar is the contract between qas-proxy and the components that find, inject
// and size it: the webhook writes these names onto a pod, the collector reads them to
// find the proxy's /stats, and the controller leaves the named container alone when it
// resizes the app. It holds names only, so every side can import it.
package sidecar

const (
	// ContainerName is the name of the qas-proxy container in an injected pod.
	ContainerName = "qas-proxy"

	// InjectLabel=InjectValue opts a pod in (as a label, or as an annotation when there
	// is no such label); injected pods carry it as a label, which is how the collector
	// finds the pods to scrape.
	InjectLabel = "qas.dev/inject"
	InjectValue = "true"
	// InjectedAnnotation marks a pod that already has the sidecar.
	InjectedAnnotation = "qas.dev/injected"

	// AdminPortAnnotation is the proxy's admin port (/stats, /metrics, /healthz,
	// /readyz); DefaultAdminPort when absent.
	AdminPortAnnotation = "qas.dev/admin-port"
	// DefaultAdminPort is the proxy's admin port number.
	DefaultAdminPort = 9901
	// AdminPortName is the name of the proxy's admin container port.
	AdminPortName = "qas-admin"
	// StatsURLAnnotation overrides the whole /stats address (tests, port-forwards).
	StatsURLAnnotation = "qas.dev/stats-url"
	// ConcurrencyAnnotation is the proxy's concurrency limit k (a positive integer).
	ConcurrencyAnnotation = "qas.dev/concurrency"
)
