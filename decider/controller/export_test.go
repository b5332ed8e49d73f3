package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// CachedPods returns the pods of namespace ns in c's informer cache, so that
// integration tests can wait for the cache to catch up with what they just did.
func CachedPods(c *Controller, ns string) ([]*corev1.Pod, error) {
	return c.watch.pods.Pods(ns).List(labels.Everything())
}

// SetActHooks sets functions run just before and just after a cycle's action, for
// tests that simulate a crash there.
func SetActHooks(c *Controller, before, after func()) {
	c.beforeAct, c.afterAct = before, after
}
