package controller

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/qas-dev/qas/decider/api/v1alpha1"
)

// setReplicas sets the target's replica count through the scale subresource.
// A conflict is read again and retried (client-go's default back-off, five
// tries): the scale's resource version is the Deployment's, which its own
// controller bumps with every status write, so a conflict usually means a
// status changed between the read and the write, not that someone else
// scaled it (the decision owns the count either way, as the HPA's does).
func (c *Controller) setReplicas(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, n int32) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sc, err := c.Scales.Scales(qa.Namespace).Get(ctx, t.resource.GroupResource(), qa.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
		if err != nil || sc.Spec.Replicas == n {
			return err
		}
		sc.Spec.Replicas = n
		_, err = c.Scales.Scales(qa.Namespace).Update(ctx, t.resource.GroupResource(), sc, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("scale %s to %d: %w", qa.Spec.ScaleTargetRef.Name, n, err)
	}
	return nil
}

// unsurge scales the target from its surged count (before+1) back to before. Any
// other count is left as it is: the surge was undone already (a repeated undo), or
// someone scaled the target since, and their count stands.
func (c *Controller) unsurge(ctx context.Context, qa *v1alpha1.QueueAutoscaler, t target, before int32) error {
	gr := t.resource.GroupResource()
	sc, err := c.Scales.Scales(qa.Namespace).Get(ctx, gr, qa.Spec.ScaleTargetRef.Name, metav1.GetOptions{})
	if err == nil && sc.Spec.Replicas != before+1 {
		if sc.Spec.Replicas != before {
			c.Log.Info("migration undone without scaling back: the target's replica count changed since the surge",
				zap.String("queueautoscaler", qa.Namespace+"/"+qa.Name), zap.Int32("replicas", sc.Spec.Replicas), zap.Int32("surged", before+1))
		}
		return nil
	}
	if err == nil {
		sc.Spec.Replicas = before
		_, err = c.Scales.Scales(qa.Namespace).Update(ctx, gr, sc, metav1.UpdateOptions{}) // a conflict means someone else scaled it: retried next time
	}
	if err != nil {
		return fmt.Errorf("scale %s back to %d: %w", qa.Spec.ScaleTargetRef.Name, before, err)
	}
	return nil
}
