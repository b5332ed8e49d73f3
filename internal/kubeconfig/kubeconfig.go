// Package kubeconfig finds a QAS command's Kubernetes client configuration: the
// kubeconfig file its --kubeconfig flag names, else the pod's in-cluster one.
package kubeconfig

import (
	"errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load returns the client configuration of the kubeconfig file at path or, when path
// is empty, the in-cluster configuration (the pod's ServiceAccount). Its error says to
// set --kubeconfig, which is what a command run outside a cluster lacks.
func Load(path string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, errors.Join(errors.New("kubernetes config (set --kubeconfig outside a cluster)"), err)
	}
	return cfg, nil
}
