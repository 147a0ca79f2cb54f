// Package clusterset decides what a WorkerClusterSet does with its selection: which WorkerClusters to
// make, which to bring in line with the set's template, which to cordon as their cluster leaves the
// selection and which to remove once nothing of Gantry's needs them, and what the set's status says.
// It does no I/O; hub/workerclusterset reads a View and carries out the Plan.
//
// The rules that keep jobs safe live here: a WorkerCluster the set did not make is never changed or
// removed; one whose cluster left the selection is cordoned first and removed only while no Workload
// runs or is nominated there; a selection that cannot be read changes no WorkerCluster.
package clusterset

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// LeavingPoll is how often a set looks again at a cluster that waits to be removed.
const LeavingPoll = 10 * time.Second

// Problem is why the selection could not be read.
type Problem struct {
	Reason  string
	Message string
}

// View is what the controller read for one set.
type View struct {
	Now time.Time
	Set *gantry.WorkerClusterSet
	// Selected names the clusters the selection lists; ignored when Problem is set.
	Selected []string
	Problem  *Problem
	// WorkerClusters holds every WorkerCluster of the hub, by name.
	WorkerClusters map[string]*gantry.WorkerCluster
	// Needed names, for a WorkerCluster, the Workloads (namespace/name) that run or are nominated there;
	// it is read for those the set made that left the selection.
	Needed map[string][]string
}

// Plan is what to write. Each write stands on its own; the next look decides again.
type Plan struct {
	Create []*gantry.WorkerCluster
	// Update are WorkerClusters the set made, changed as they should be.
	Update []*gantry.WorkerCluster
	// Delete are WorkerClusters the set made that nothing needs any more.
	Delete []*gantry.WorkerCluster
	// Status, when set, is the set's new status.
	Status       *gantry.WorkerClusterSetStatus
	RequeueAfter time.Duration
}

// Decide returns the Plan of the set in v.
func Decide(v View) Plan {
	var p Plan
	st := &gantry.WorkerClusterSetStatus{Conditions: slices.Clone(v.Set.Status.Conditions)}
	selected := map[string]bool{}
	if v.Problem == nil {
		for _, name := range v.Selected {
			selected[name] = true
		}
	}
	for _, name := range sortedNames(selected) {
		st.Clusters = append(st.Clusters, p.join(v, name))
	}
	for _, name := range sortedNames(v.WorkerClusters) {
		wc := v.WorkerClusters[name]
		switch {
		case !MadeBy(v.Set, wc) || selected[name]:
		case v.Problem != nil:
			st.Clusters = append(st.Clusters, member(gantry.MemberJoined, wc, ""))
		default:
			st.Clusters = append(st.Clusters, p.leave(v, wc))
		}
	}
	count(st, len(selected))
	setSynced(st, v)
	if !equality.Semantic.DeepEqual(&v.Set.Status, st) {
		p.Status = st
	}
	return p
}

// join makes or keeps the WorkerCluster of a selected cluster.
func (p *Plan) join(v View, name string) gantry.WorkerClusterSetMember {
	wc, exists := v.WorkerClusters[name]
	switch {
	case !exists:
		made := newWorkerCluster(v.Set, name)
		p.Create = append(p.Create, made)
		return member(gantry.MemberJoined, made, "its WorkerCluster was just made")
	case !MadeBy(v.Set, wc):
		return gantry.WorkerClusterSetMember{Name: name, State: gantry.MemberConflict, Message: conflictMessage(wc)}
	}
	want := wc.DeepCopy()
	applyTemplate(v.Set, want)
	if want.Annotations[gantry.CordonedBySetAnnotation] != "" {
		// Selected again after the set cordoned it as it left: it takes jobs again.
		want.Spec.Cordoned = false
		delete(want.Annotations, gantry.CordonedBySetAnnotation)
	}
	if !equality.Semantic.DeepEqual(wc, want) {
		p.Update = append(p.Update, want)
	}
	return member(gantry.MemberJoined, wc, "")
}

// leave cordons the WorkerCluster of a cluster no longer selected, and removes it once no Workload
// needs it.
func (p *Plan) leave(v View, wc *gantry.WorkerCluster) gantry.WorkerClusterSetMember {
	if !wc.Spec.Cordoned {
		cordoned := wc.DeepCopy()
		cordoned.Spec.Cordoned = true
		if cordoned.Annotations == nil {
			cordoned.Annotations = map[string]string{}
		}
		cordoned.Annotations[gantry.CordonedBySetAnnotation] = v.Now.UTC().Format(time.RFC3339)
		p.Update = append(p.Update, cordoned)
		p.requeue(LeavingPoll)
		return member(gantry.MemberLeaving, wc, "left the selection: cordoned, no new jobs go there")
	}
	needed := v.Needed[wc.Name]
	if settle := cordonedAt(wc).Add(LeavingPoll).Sub(v.Now); settle > 0 && len(needed) == 0 {
		// A dispatch that read the cluster before the cordon may still be on its way: let it land.
		p.requeue(settle)
		return member(gantry.MemberLeaving, wc, "left the selection: cordoned, no new jobs go there")
	}
	if len(needed) == 0 {
		p.Delete = append(p.Delete, wc)
		return member(gantry.MemberLeaving, wc, "left the selection and no job of Gantry's needs it: removing its WorkerCluster")
	}
	p.requeue(LeavingPoll)
	return member(gantry.MemberLeaving, wc, fmt.Sprintf("left the selection: cordoned; removed once %d workloads no longer run or wait there (%s)",
		len(needed), strings.Join(bounded(needed, 5), ", ")))
}

// cordonedAt is when the set cordoned the WorkerCluster; zero when it did not, or long ago.
func cordonedAt(wc *gantry.WorkerCluster) time.Time {
	t, err := time.Parse(time.RFC3339, wc.Annotations[gantry.CordonedBySetAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// MadeBy says whether the set made the WorkerCluster: it carries the set's label and the set is its
// controller.
func MadeBy(set *gantry.WorkerClusterSet, wc *gantry.WorkerCluster) bool {
	ref := metav1.GetControllerOf(wc)
	return wc.Labels[gantry.WorkerClusterSetLabel] == set.Name && ref != nil && ref.UID == set.UID
}

func newWorkerCluster(set *gantry.WorkerClusterSet, name string) *gantry.WorkerCluster {
	wc := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, gantry.GroupVersion.WithKind("WorkerClusterSet"))}}}
	applyTemplate(set, wc)
	return wc
}

// applyTemplate makes the parts of wc the set decides what its template says; cordoning and fencing
// are left as they are.
func applyTemplate(set *gantry.WorkerClusterSet, wc *gantry.WorkerCluster) {
	if wc.Labels == nil {
		wc.Labels = map[string]string{}
	}
	for k, val := range set.Spec.Template.Labels {
		wc.Labels[k] = val
	}
	wc.Labels[gantry.WorkerClusterSetLabel] = set.Name
	wc.Spec.KubeconfigSecretRef = nil
	wc.Spec.ClusterProfileRef = &gantry.ClusterProfileReference{Name: wc.Name}
	wc.Spec.Failover = *set.Spec.Template.Failover.DeepCopy()
}

func conflictMessage(wc *gantry.WorkerCluster) string {
	switch {
	case wc.Labels[gantry.WorkerClusterSetLabel] != "":
		return fmt.Sprintf("WorkerCluster %s belongs to WorkerClusterSet %s; this set leaves it alone", wc.Name, wc.Labels[gantry.WorkerClusterSetLabel])
	case wc.Spec.ClusterProfileRef != nil:
		return fmt.Sprintf("WorkerCluster %s was registered by hand through ClusterProfile %s; this set leaves it alone", wc.Name, wc.Spec.ClusterProfileRef.Name)
	}
	return fmt.Sprintf("WorkerCluster %s was registered by hand (Secret %s); this set leaves it alone", wc.Name, wc.Spec.SecretName())
}

func member(state gantry.MemberState, wc *gantry.WorkerCluster, msg string) gantry.WorkerClusterSetMember {
	m := gantry.WorkerClusterSetMember{Name: wc.Name, State: state, Connected: metav1.ConditionUnknown, Message: msg}
	if c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected); c != nil {
		m.Connected = c.Status
		if c.Status != metav1.ConditionTrue && msg == "" {
			m.Message = c.Reason + ": " + c.Message
		}
	}
	return m
}

func count(st *gantry.WorkerClusterSetStatus, selected int) {
	st.Selected = int32(selected)
	for _, m := range st.Clusters {
		switch m.State {
		case gantry.MemberJoined:
			st.Joined++
			if m.Connected == metav1.ConditionTrue {
				st.Connected++
			}
		case gantry.MemberLeaving:
			st.Leaving++
		case gantry.MemberConflict:
			st.Conflicts++
		}
	}
}

func setSynced(st *gantry.WorkerClusterSetStatus, v View) {
	c := metav1.Condition{Type: gantry.SetSynced, Status: metav1.ConditionTrue, Reason: gantry.ReasonSelected,
		Message: fmt.Sprintf("%d clusters selected", st.Selected), ObservedGeneration: v.Set.Generation, LastTransitionTime: metav1.NewTime(v.Now)}
	if v.Problem != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v.Problem.Reason, v.Problem.Message+"; no WorkerCluster is added or removed until it can be read"
	}
	apimeta.SetStatusCondition(&st.Conditions, c)
}

func (p *Plan) requeue(d time.Duration) {
	if p.RequeueAfter == 0 || d < p.RequeueAfter {
		p.RequeueAfter = d
	}
}

func sortedNames[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func bounded(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}
