package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/agent/admission"
	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// gpuQuota is a ResourceQuota of namespace ns whose status allows hard of resource r and counts used.
func gpuQuota(r corev1.ResourceName, hard, used string) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "ns"},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{r: resource.MustParse(hard)}, Used: corev1.ResourceList{r: resource.MustParse(used)}}}
}

// A copy is admitted only within what the ResourceQuotas of its namespace leave: one that a quota
// could never hold is rejected, one it cannot hold now waits, two it holds one of at a time go one
// after the other, and room that copies admitted here still have to create is counted as taken.
func TestDecideWithinNamespaceQuotas(t *testing.T) {
	const gpus = corev1.ResourceName("requests.nvidia.com/gpu")
	nodes := []*corev1.Node{gpuNode("n1"), gpuNode("n2")}
	type want struct{ reason, words string }
	for name, tc := range map[string]struct {
		quotas []*corev1.ResourceQuota
		copies []*gantryv1beta1.Workload
		place  map[types.UID]admission.Placement
		want   map[string]want // by copy name
	}{
		"no quota": {copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want: map[string]want{"a": {reason: gantryv1beta1.ReasonFits}}},
		"a quota that limits nothing limits nothing": {
			quotas: []*corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"}}},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want:   map[string]want{"a": {reason: gantryv1beta1.ReasonFits}}},
		"a quota its controller has not counted yet makes what it limits wait": {
			quotas: []*corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{gpus: resource.MustParse("8")}}}},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want: map[string]want{"a": {reason: gantryv1beta1.ReasonInsufficientResources,
				words: "ResourceQuota new of namespace ns does not count requests.nvidia.com/gpu yet"}}},
		"a resource added to a quota is not counted until its controller caught up": {
			quotas: []*corev1.ResourceQuota{func() *corev1.ResourceQuota {
				q := gpuQuota("pods", "10", "0")
				q.Spec.Hard = corev1.ResourceList{"pods": resource.MustParse("10"), gpus: resource.MustParse("64")}
				return q
			}()},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want:   map[string]want{"a": {reason: gantryv1beta1.ReasonInsufficientResources, words: "does not count requests.nvidia.com/gpu yet"}}},
		"what an uncounted quota does not limit goes": {
			quotas: []*corev1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": resource.MustParse("8")}}}},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want:   map[string]want{"a": {reason: gantryv1beta1.ReasonFits}}},
		"more GPUs than the quota allows at all": {quotas: []*corev1.ResourceQuota{gpuQuota(gpus, "8", "0")},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "8").Obj()},
			want: map[string]want{"a": {reason: gantryv1beta1.ReasonNamespaceQuotaTooSmall,
				words: "ResourceQuota team of namespace ns allows 8 requests.nvidia.com/gpu; the job needs 16"}}},
		"more than the quota leaves now": {quotas: []*corev1.ResourceQuota{gpuQuota(gpus, "16", "12")},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj()},
			want: map[string]want{"a": {reason: gantryv1beta1.ReasonInsufficientResources,
				words: "has 4 requests.nvidia.com/gpu left of 16; the job needs 8"}}},
		"no Job may be created in the namespace": {quotas: []*corev1.ResourceQuota{gpuQuota("count/jobs.batch", "0", "0")},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "1").Obj()},
			want:   map[string]want{"a": {reason: gantryv1beta1.ReasonNamespaceQuotaTooSmall, words: "allows 0 count/jobs.batch"}}},
		"two the quota holds one of: the first in admission order goes": {quotas: []*corev1.ResourceQuota{gpuQuota(gpus, "8", "0")},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 1, "8").Obj(), copyOf("b", 1, 1, "8").Obj()},
			want: map[string]want{"a": {reason: gantryv1beta1.ReasonFits},
				"b": {reason: gantryv1beta1.ReasonInsufficientResources, words: "has 0 requests.nvidia.com/gpu left of 8"}}},
		"an admitted copy whose pods are not created yet holds its part": {quotas: []*corev1.ResourceQuota{gpuQuota("pods", "2", "0")},
			copies: []*gantryv1beta1.Workload{copyOf("a", 0, 2, "1").Admitted().Since(now.Add(-time.Minute)).Obj(), copyOf("b", 1, 1, "1").Obj()},
			place:  map[types.UID]admission.Placement{"copy-a": gpuPlacement("n1", 2)},
			want:   map[string]want{"b": {reason: gantryv1beta1.ReasonInsufficientResources, words: "has 0 pods left of 2"}}},
	} {
		t.Run(name, func(t *testing.T) {
			p := Decide(Input{Nodes: nodes, Copies: tc.copies, Quotas: tc.quotas, Placements: tc.place, Now: now})
			got := map[string]metav1.Condition{}
			for _, u := range p.Updates {
				got[u.Copy.Name] = u.Condition
			}
			for copyName, w := range tc.want {
				c, ok := got[copyName]
				if !ok || c.Reason != w.reason || !strings.Contains(c.Message, w.words) {
					t.Errorf("copy %s: %+v, want %s saying %q", copyName, c, w.reason, w.words)
				}
				if _, held := p.Snapshot.Reservation("ns/" + copyName); held != (w.reason == gantryv1beta1.ReasonFits) {
					t.Errorf("copy %s: room held %v", copyName, held)
				}
			}
		})
	}
}

// A ResourceQuota counts a pod's RuntimeClass overhead in its requests, and so does the demand the agent
// charges.
func TestQuotaDemandCountsTheRuntimeClassOverhead(t *testing.T) {
	c := copyOf("a", 0, 2, "1").Obj()
	c.Spec.PodSets[0].Requests[corev1.ResourceCPU] = resource.MustParse("3")
	c.Spec.PodSets[0].RuntimeClassName = "kata"
	classes := map[string]*nodev1.RuntimeClass{"kata": {Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Ki")}}}}
	d := quotaDemand(c, classes, true, nil)
	if got := d["requests.cpu"]; got != 6500 {
		t.Errorf("requests.cpu %d milli, want 6500 (2 pods x (3 + 0.25))", got)
	}
	if got := d["requests.memory"]; got != 2*1024*1000 {
		t.Errorf("requests.memory %d milli, want 2Ki", got)
	}
	if got := quotaDemand(c, nil, true, nil)["requests.cpu"]; got != 6000 {
		t.Errorf("without the class known: requests.cpu %d milli, want 6000", got)
	}
}
