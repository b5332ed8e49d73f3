package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qas-dev/qas/decider/controller/resources"
	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/testenv/kubetest"
)

// localPV creates a local PersistentVolume on node and a claim bound to it, and
// returns the claim's name.
func (e *env) localPV(t *testing.T, name, node string) string {
	return e.boundClaim(t, name, "local-"+e.ns, corev1.ReadWriteOnce, corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
		&corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}}})
}

// networkClaim creates a network PersistentVolume (NFS: no node affinity, any node
// can mount it) with the given access mode and a claim bound to it, and returns the
// claim's name.
func (e *env) networkClaim(t *testing.T, name string, mode corev1.PersistentVolumeAccessMode) string {
	return e.boundClaim(t, name, "nfs-"+e.ns, mode, corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "127.0.0.1", Path: "/exports/" + name}}, nil)
}

// boundClaim creates a PersistentVolume of class with source, mode and (if not nil)
// node affinity, and a claim for it, waits until the PV controller binds the two,
// and returns the claim's name.
func (e *env) boundClaim(t *testing.T, name, class string, mode corev1.PersistentVolumeAccessMode, source corev1.PersistentVolumeSource, affinity *corev1.VolumeNodeAffinity) string {
	ctx := context.Background()
	cs := e.c.Clientset()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + e.ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName:              class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        source,
			NodeAffinity:                  affinity,
		},
	}
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "the PV controller binds the claim", func() bool {
		got, err := cs.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound && got.Spec.VolumeName == pv.Name
	})
	return name
}

// filler takes all but 500 MiB of node's local storage with a pod's ephemeral-storage
// request, as the scheduler accounts it.
func (e *env) filler(t *testing.T, node string) {
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: e.ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Tolerations:  []corev1.Toleration{kubetest.Toleration()},
			Containers: []corev1.Container{{Name: "fill", Image: "example/fill:1", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("101900Mi")},
			}}},
		},
	}
	_, err := e.c.Clientset().CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	e.eventually(t, "the filler pod runs on "+node, func() bool {
		got, err := e.c.Clientset().CoreV1().Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && got.Spec.NodeName == node && resources.IsReady(got)
	})
	t.Cleanup(func() {
		zero := int64(0)
		_ = e.c.Clientset().CoreV1().Pods(e.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

func migrationNotes(d decide.Decision) string {
	var notes []string
	for _, c := range d.Explanation.Candidates {
		if c.Note != "" {
			notes = append(notes, c.Note)
		}
	}
	return strings.Join(notes, "; ")
}

// TestLocalStorageGuard: the guard sees what a user would call node-local data on a
// real control plane. A sized emptyDir may move when allowed and the destination's
// allocatable ephemeral storage (minus the requests the scheduler counts) has room;
// hostPath data and a claim bound to a local PersistentVolume never move. The
// QueueAutoscalers are dry runs: the decisions are what is tested, and the nodes
// stay untainted for the next case.
func TestLocalStorageGuard(t *testing.T) {
	e := setup(t)
	gi := resource.MustParse("1Gi")
	emptyDir := []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &gi}}}}
	hostPath := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/app"}}}}
	tests := []struct {
		name        string
		volumes     func(t *testing.T) []corev1.Volume
		allow       bool
		fillCool    bool
		wantMigrate bool
		wantNote    string
	}{
		{name: "emptydir-allowed", volumes: func(*testing.T) []corev1.Volume { return emptyDir }, allow: true, wantMigrate: true},
		{name: "emptydir-not-allowed", volumes: func(*testing.T) []corev1.Volume { return emptyDir }, wantNote: "bound to node-local volumes and allowLocalStorage is off"},
		{name: "emptydir-no-room", volumes: func(*testing.T) []corev1.Volume { return emptyDir }, allow: true, fillCool: true,
			wantNote: "not enough free local storage for all its volumes"},
		{name: "hostpath", volumes: func(*testing.T) []corev1.Volume { return hostPath }, allow: true,
			wantNote: "its volume data holds data that stays on node"},
		{name: "local-pv", volumes: func(t *testing.T) []corev1.Volume {
			claim := e.localPV(t, "db", "kwok-node-1")
			return []corev1.Volume{{Name: "db", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}, allow: true, wantNote: "its volume db holds data that stays on node kwok-node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.deploymentOf(t, tt.name, 2, corev1.PodSpec{
				Volumes:                   tt.volumes(t),
				Containers:                []corev1.Container{appContainer("app", "500m", "500m")},
				TopologySpreadConstraints: spread(tt.name),
			})
			spec := migrationSpec()
			spec["migration"].(map[string]any)["allowLocalStorage"] = tt.allow
			e.queueAutoscalerWith(t, tt.name, tt.name, true, spec)
			pods := e.pods(t, tt.name)
			hot := pods[0].Spec.NodeName
			if tt.fillCool {
				cool := "kwok-node-1"
				if hot == cool {
					cool = "kwok-node-2"
				}
				e.filler(t, cool)
			}
			e.measureHot(pods, hot)
			e.clock.SetTime(e.clock.Now().Add(time.Second))
			d, err := e.reconcile(t, e.ctrl, tt.name)
			require.NoError(t, err)
			require.Equal(t, tt.wantMigrate, d.Action.Has(decide.ActionMigrate), "%s: %s", d.Explanation.Reason, migrationNotes(d))
			if tt.wantMigrate {
				require.Equal(t, int64(1<<30), d.Migration.DataBytes, "the emptyDir's size is the data to rebuild")
				return
			}
			require.Contains(t, migrationNotes(d), tt.wantNote)
		})
	}
}

func spread(app string) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}}
}

// TestSingleNodeClaimMovesByEviction: a Deployment's pod whose network claim only one
// node can mount at a time (ReadWriteOnce, ReadWriteOncePod) cannot move by surge,
// since the replacement would wait on another node for the volume the pod holds; it
// is evicted instead and the ReplicaSet starts its replacement on a cool node. With a
// claim many nodes can mount (ReadWriteMany, ReadOnlyMany, or a read-only mount) the
// surge stays. (The scheduler runs one pod per ReadWriteOncePod claim, so that case
// has one replica.)
func TestSingleNodeClaimMovesByEviction(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name     string
		mode     corev1.PersistentVolumeAccessMode
		readOnly bool
		replicas int32
		want     decide.MoveMethod
	}{
		{"rwo", corev1.ReadWriteOnce, false, 2, decide.MoveEvict},
		{"rwop", corev1.ReadWriteOncePod, false, 1, decide.MoveEvict},
		{"rwx", corev1.ReadWriteMany, false, 2, decide.MoveSurge},
		{"rox", corev1.ReadOnlyMany, false, 2, decide.MoveSurge},
		{"rwo-read-only-mount", corev1.ReadWriteOnce, true, 2, decide.MoveSurge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := e.networkClaim(t, tt.name, tt.mode)
			e.deploymentOf(t, tt.name, tt.replicas, corev1.PodSpec{
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: tt.readOnly}}}},
				Containers:                []corev1.Container{appContainer("app", "500m", "500m")},
				TopologySpreadConstraints: spread(tt.name),
			})
			e.queueAutoscalerWith(t, tt.name, tt.name, true, migrationSpec())
			pods := e.pods(t, tt.name)
			e.measureHot(pods, pods[0].Spec.NodeName)
			e.clock.SetTime(e.clock.Now().Add(time.Second))
			d, err := e.reconcile(t, e.ctrl, tt.name)
			require.NoError(t, err)
			require.True(t, d.Action.Has(decide.ActionMigrate), "%s: %s", d.Explanation.Reason, migrationNotes(d))
			require.Equal(t, tt.want, d.Migration.Method)
		})
	}

	// Carried out: the pod is evicted, the Deployment is not surged, and the
	// ReplicaSet's replacement (another name) runs off the hot node.
	e.removeHotTaint(t)
	claim := e.networkClaim(t, "moved", corev1.ReadWriteOnce)
	e.deploymentOf(t, "moved", 2, corev1.PodSpec{
		Volumes:                   []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		Containers:                []corev1.Container{appContainer("app", "500m", "500m")},
		TopologySpreadConstraints: spread("moved"),
	})
	e.queueAutoscalerWith(t, "moved", "moved", false, migrationSpec())
	pods := e.pods(t, "moved")
	victim, hot := pods[0], pods[0].Spec.NodeName
	e.measureHot(pods, hot)
	e.clock.SetTime(e.clock.Now().Add(time.Second))
	d, err := e.reconcile(t, e.ctrl, "moved")
	require.NoError(t, err)
	require.True(t, d.Action.Has(decide.ActionMigrate), d.Explanation.Reason)
	require.Equal(t, "evict/replacing", e.migrationPhase(t, "moved"))
	require.Equal(t, int32(2), e.replicas(t, "moved"), "no surge")
	require.True(t, e.nodeTainted(t, hot))
	e.eventually(t, "the ReplicaSet's replacement is Ready off the hot node", func() bool {
		for _, p := range e.readyPods(t, "moved") {
			if p.Name != pods[0].Name && p.Name != pods[1].Name && p.Spec.NodeName != hot {
				return true
			}
		}
		return false
	})
	e.clock.SetTime(e.clock.Now().Add(15 * time.Second))
	_, err = e.reconcile(t, e.ctrl, "moved")
	require.NoError(t, err)
	require.Empty(t, e.migrationPhase(t, "moved"), "finished")
	require.False(t, e.nodeTainted(t, hot))
	require.Nil(t, e.pod(t, victim.Name), "the slowed pod is gone")
	require.Contains(t, e.events(t, "Migrated")[0].Message, "moved "+victim.Name+" off hot node "+hot)
}
