package decide

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// planMigration looks for a hot node (absolute utilisation above φ) where one
// of the workload's pods (not being deleted) is slowed (throttled, or its service time above
// SlowFactor × the workload's median), and plans one move off it: the
// workload's own pod (MoverOwn) or the biggest neighbour (MoverNeighbour), to the
// coolest node that has room for its CPU request and, for node-local data, for
// all its volumes together. Only pods that can be moved (Pod.Move) are
// planned, and a hot node for which hold returns a reason (the per-node
// back-off) is left alone; hold may be nil. It returns the plan, what E[S]
// keeps once the slowed pods run normally (the not-slowed pods' mean service
// time over all pods' in the interval, at most 1; 0 when unknown), and a note
// explaining the outcome.
func planMigration(spec Spec, snap Snapshot, hold func(node string) string) (*MigrationPlan, float64, string) {
	mig := spec.Migration
	nodes := map[string]Node{}
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	var times []float64
	for _, p := range snap.Pods {
		if p.ServiceTime > 0 {
			times = append(times, p.ServiceTime)
		}
	}
	median := medianOf(times)
	slowed := func(p Pod) bool {
		return p.ThrottledFraction > mig.ThrottleThreshold || (median > 0 && p.ServiceTime > mig.SlowFactor*median)
	}
	var healthySum float64
	var healthyN int
	for _, p := range snap.Pods {
		if p.ServiceTime > 0 && !slowed(p) {
			healthySum += p.ServiceTime
			healthyN++
		}
	}
	kept := 0.0
	if healthyN > 0 {
		var all float64
		for _, t := range times {
			all += t
		}
		kept = min(1, healthySum/float64(healthyN)/(all/float64(len(times))))
	}

	// Our slowed pods on hot nodes, hottest node first.
	type victim struct {
		pod  Pod
		util float64
	}
	var victims []victim
	for _, p := range snap.Pods {
		n, ok := nodes[p.Node]
		if !ok || p.Terminating || !slowed(p) {
			continue
		}
		if u := nodeUtil(n); u > mig.NodeThreshold {
			victims = append(victims, victim{p, u})
		}
	}
	if len(victims) == 0 {
		return nil, 0, ""
	}
	sort.SliceStable(victims, func(i, j int) bool { return victims[i].util > victims[j].util })

	var notes []string
	held := map[string]bool{}
	for _, v := range victims {
		hot := nodes[v.pod.Node]
		if hold != nil {
			if why := hold(hot.Name); why != "" {
				if !held[hot.Name] {
					notes = append(notes, why)
				}
				held[hot.Name] = true
				continue
			}
		}
		var movers []Pod
		if mig.Mover == MoverNeighbour {
			movers = neighboursBySize(hot)
		} else {
			movers = []Pod{v.pod}
		}
		for _, p := range movers {
			plan, why := placePod(spec, snap, p, hot)
			if plan != nil {
				plan.Mover = mig.Mover
				plan.PodsOnNode = ownPodsOn(snap)[hot.Name]
				note := fmt.Sprintf("node %s at %.0f%% CPU (> φ = %.0f%%) slows pod %s; move %s to %s",
					hot.Name, v.util*100, mig.NodeThreshold*100, v.pod.Name, plan.Pod, plan.ToNode)
				if plan.DataBytes > 0 {
					note += fmt.Sprintf(" with %d bytes of local data (about %s)", plan.DataBytes, plan.MoveTime.Round(time.Second))
				}
				return plan, kept, note
			}
			notes = append(notes, fmt.Sprintf("cannot move %s off %s: %s", p.Name, hot.Name, why))
		}
		if len(movers) == 0 {
			notes = append(notes, fmt.Sprintf("node %s is hot but has no neighbour pod to move", hot.Name))
		}
	}
	return nil, 0, "no migration: " + joinNotes(notes)
}

func joinNotes(n []string) string {
	out := ""
	for i, s := range n {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// neighboursBySize returns the hot node's other pods (not being deleted), biggest CPU user first
// (ties by request), as the thesis' Algorithm 2 picks the pod with most resources.
func neighboursBySize(n Node) []Pod {
	var out []Pod
	for _, p := range n.Pods {
		if !p.Owned && !p.Terminating {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].CPUUsage != out[j].CPUUsage {
			return out[i].CPUUsage > out[j].CPUUsage
		}
		return out[i].CPURequest > out[j].CPURequest
	})
	return out
}

// placePod finds the destination for p: schedulable, not hot, not its own node,
// with room for its request, staying under φ after the move, and with free
// local storage for all its node-local volumes together. Coolest wins.
func placePod(spec Spec, snap Snapshot, p Pod, from Node) (*MigrationPlan, string) {
	mig := spec.Migration
	if p.Move == MoveNone {
		if p.NoMove != "" {
			return nil, p.NoMove
		}
		return nil, "its owner cannot move it"
	}
	var data int64
	for _, v := range p.LocalVolumes {
		data += v.SizeBytes
	}
	if len(p.LocalVolumes) > 0 && !mig.AllowLocalStorage {
		return nil, "it is bound to node-local volumes and allowLocalStorage is off"
	}
	for _, v := range p.LocalVolumes {
		if v.Pinned {
			return nil, fmt.Sprintf("its volume %s holds data that stays on node %s (hostPath or node-local PersistentVolume); a replacement elsewhere would not have it", v.Name, v.Node)
		}
	}
	type dest struct {
		n     Node
		after float64
	}
	var ok []dest
	reasons := map[string]bool{}
	for _, n := range snap.Nodes {
		if n.Name == from.Name {
			continue
		}
		if n.Unschedulable {
			reasons["unschedulable"] = true
			continue
		}
		if n.AllocatableCPU-n.RequestedCPU < p.CPURequest {
			reasons["no CPU room for its request"] = true
			continue
		}
		after := (n.UsedCPU + p.CPUUsage) / (float64(n.AllocatableCPU) / 1000)
		if n.AllocatableCPU <= 0 || after > mig.NodeThreshold {
			reasons["would be hot after the move"] = true
			continue
		}
		if data > 0 && n.FreeLocalStorageBytes < data {
			reasons["not enough free local storage for all its volumes"] = true
			continue
		}
		ok = append(ok, dest{n, after})
	}
	if len(ok) == 0 {
		if len(reasons) == 0 {
			return nil, "no other node"
		}
		var rs []string
		for r := range reasons {
			rs = append(rs, r)
		}
		slices.Sort(rs)
		return nil, "no destination: every other node is " + joinNotes(rs)
	}
	sort.SliceStable(ok, func(i, j int) bool { return ok[i].after < ok[j].after })
	plan := &MigrationPlan{Pod: p.Name, FromNode: from.Name, ToNode: ok[0].n.Name, Method: p.Move, DataBytes: data}
	if data > 0 {
		plan.MoveTime = time.Duration(float64(data) / mig.DataMoveBytesPerSecond * float64(time.Second))
	}
	return plan, ""
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PlanMigration runs only the migration check, for a controller that runs it
// on its own shorter cycle τ (seed 003) between full decisions. It returns the
// plan (nil when none), the expected E[S] once the slowed pods run normally (the
// snapshot's E[S] × what planMigration says it keeps; 0 when unknown) and a note
// explaining the outcome. It keeps no state: the
// cooldown after a migration and the per-node back-off are the Engine's.
func PlanMigration(spec Spec, snap Snapshot) (*MigrationPlan, float64, string, error) {
	if err := Validate(spec); err != nil {
		return nil, 0, "", err
	}
	if err := validateSnapshot(snap); err != nil {
		return nil, 0, "", err
	}
	spec = withDefaults(spec)
	if !spec.Migration.Enabled {
		return nil, 0, "migration is disabled", nil
	}
	plan, kept, note := planMigration(spec, snap, nil)
	if plan != nil {
		plan.Mover = spec.Migration.Mover
	}
	return plan, snap.ServiceTime * kept, note, nil
}
