package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// podGroupNameMax keeps a PodGroup's name a valid label value (gantry.dev/pod-group on its pods).
const podGroupNameMax = 63

// GangPodGroup is the PodGroup that the pods of copy c's gang join on this cluster, so that its scheduler
// binds them all or none: the pods of the pod sets that are not deferred (a deferred pod set's pods come
// after the others started or finished, and would wait for a quorum that is gone), in one domain of the
// copy's topology key when it names one. The copy owns it, so the garbage collector removes it on every
// path that removes the copy (withdrawal, eviction, fence, deletion). Nil when fewer than two pods would
// join (one pod is bound whole anyway), or when they name different PriorityClasses.
func GangPodGroup(c *gantryv1beta1.Workload) *schedulingv1beta1.PodGroup {
	var members int32
	var classes []string
	for _, ps := range c.Spec.PodSets {
		if !ps.Deferred {
			members += ps.Count
			classes = append(classes, ps.PriorityClassName)
		}
	}
	// The scheduler refuses to place a group whose pods' priority is not the group's own, so the group
	// takes their PriorityClass (none: the cluster's default, as for the pods); pod sets of different
	// classes make no group.
	if members < 2 || len(slices.Compact(classes)) > 1 {
		return nil
	}
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name:      PodGroupName(c),
			Namespace: c.Namespace,
			Labels: map[string]string{
				gantryv1beta1.WorkloadUIDLabel:   c.Labels[gantryv1beta1.WorkloadUIDLabel],
				gantryv1beta1.DispatchEpochLabel: c.Labels[gantryv1beta1.DispatchEpochLabel],
				gantryv1beta1.JobNameLabel:       c.Labels[gantryv1beta1.JobNameLabel],
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: gantryv1beta1.GroupVersion.String(),
				Kind:       "Workload",
				Name:       c.Name,
				UID:        c.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: members}},
			PriorityClassName: classes[0],
		},
	}
	if c.Spec.TopologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: c.Spec.TopologyKey}},
		}
	}
	return pg
}

// PodGroupName names copy c's PodGroup: the copy's name, shortened to fit a label value, and a hash of
// its UID, so that the copy of a later dispatch never meets the PodGroup of an earlier one the garbage
// collector has not removed yet.
func PodGroupName(c *gantryv1beta1.Workload) string {
	sum := sha256.Sum256([]byte(c.UID))
	suffix := "-" + hex.EncodeToString(sum[:4])
	name := c.Name
	if len(name) > podGroupNameMax-len(suffix) {
		name = strings.TrimRight(name[:podGroupNameMax-len(suffix)], "-.")
	}
	return name + suffix
}

// gangToLoosen is the PodGroup of admitted copy c to lower to a quorum of one, or nil: once the gang's
// pods were all placed, a pod that comes after them (the replacement of a failed pod, a Job's next wave)
// would otherwise wait for a quorum of pods that have finished, which the scheduler no longer counts.
func gangToLoosen(in Input, c *gantryv1beta1.Workload, progress Progress, pods []*corev1.Pod) *schedulingv1beta1.PodGroup {
	if c.Status.Admission == nil || c.Status.Admission.PodGroup == "" || !progress.Done() {
		return nil
	}
	pg := in.PodGroups[types.NamespacedName{Namespace: c.Namespace, Name: c.Status.Admission.PodGroup}]
	if pg == nil || pg.Spec.SchedulingPolicy.Gang == nil || pg.Spec.SchedulingPolicy.Gang.MinCount <= 1 {
		return nil
	}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" && !IsTerminal(pod) && pod.DeletionTimestamp == nil && pod.Labels[gantryv1beta1.PodGroupLabel] == pg.Name {
			return pg
		}
	}
	return nil
}

// gangMissing is copy c's PodGroup when its admission names one the cluster does not hold while pods
// of the gang may still need it (a create that failed, or someone removed it): made again, else those
// pods would wait for it until the placement timeout.
func gangMissing(in Input, c *gantryv1beta1.Workload, progress Progress) *schedulingv1beta1.PodGroup {
	if in.PodGroups == nil || c.Status.Admission == nil || c.Status.Admission.PodGroup == "" || progress.Done() {
		return nil
	}
	if _, ok := in.PodGroups[types.NamespacedName{Namespace: c.Namespace, Name: c.Status.Admission.PodGroup}]; ok {
		return nil
	}
	if pg := GangPodGroup(c); pg != nil && pg.Name == c.Status.Admission.PodGroup {
		return pg
	}
	return nil
}

// gangVerdict is what the scheduler last said of admitted copy c's PodGroup when it could not place the
// gang ("PodGroup NAME: REASON: MESSAGE"); empty when it said nothing of the kind.
func gangVerdict(in Input, c *gantryv1beta1.Workload) string {
	if c.Status.Admission == nil || c.Status.Admission.PodGroup == "" {
		return ""
	}
	pg := in.PodGroups[types.NamespacedName{Namespace: c.Namespace, Name: c.Status.Admission.PodGroup}]
	if pg == nil {
		return ""
	}
	cond := meta.FindStatusCondition(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled)
	if cond == nil || cond.Status != metav1.ConditionFalse {
		return ""
	}
	return fmt.Sprintf("PodGroup %s: %s: %s", pg.Name, cond.Reason, cond.Message)
}
