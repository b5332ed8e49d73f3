package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// setReady sets a pod's Ready condition as the kubelet would, with the given
// transition time.
func (e *env) setReady(t *testing.T, name string, ready bool, at time.Time) {
	ctx := context.Background()
	p, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.LastTransitionTime = st, metav1.NewTime(at)
		}
	}
	_, err = e.c.Clientset().CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func readyTime(p corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// TestInitTimeFollowsPodStartUp: on a cluster whose kubelet (kwok) takes a while to
// make pods Ready, status.initTime reports that start-up time, with predictive
// scaling off (it is an observation). A pod that later flaps NotReady→Ready keeps
// its first Ready: the init time does not grow to the flap.
func TestInitTimeFollowsPodStartUp(t *testing.T) {
	const delay = 3 * time.Second
	c := kubetest.StartT(t, kubetest.Options{Scheduler: true, ControllerManager: true, Kwok: true, PodReadyDelay: delay,
		Nodes: []kubetest.NodeSpec{{Name: "kwok-slow-1"}}})
	e := setupOn(t, c) // the controller watches before the pods exist
	e.deployment(t, "slow", 2)
	e.queueAutoscaler(t, "slow", "slow", true)
	e.metrics.set(10, 0.05, e.clock.Now())
	_, err := e.reconcile(t, e.ctrl, "slow")
	require.NoError(t, err)
	qa := e.get(t, "slow")
	require.Nil(t, qa.Spec.Predictive, "predictive is off")
	initTime, err := time.ParseDuration(qa.Status.InitTime)
	require.NoError(t, err, "status.initTime %q", qa.Status.InitTime)
	require.GreaterOrEqual(t, initTime, delay, "the pods took at least the kubelet's delay to become Ready")

	// One pod flaps: NotReady, then Ready again a minute after its first Ready.
	pod := e.pods(t, "slow")[0]
	first := readyTime(pod)
	e.setReady(t, pod.Name, false, first.Add(30*time.Second))
	e.setReady(t, pod.Name, true, first.Add(time.Minute))
	flapped := e.pods(t, "slow")
	for _, p := range flapped {
		if p.Name == pod.Name {
			require.Greater(t, readyTime(p).Sub(p.CreationTimestamp.Time), initTime, "creation→current Ready would inflate the init time")
		}
	}
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	e.metrics.set(10, 0.05, e.clock.Now())
	_, err = e.reconcile(t, e.ctrl, "slow")
	require.NoError(t, err)
	require.Equal(t, qa.Status.InitTime, e.get(t, "slow").Status.InitTime, "the first Ready transition counts, not the flap")
}
