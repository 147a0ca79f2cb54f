package queues

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestQuotaGrew(t *testing.T) {
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	spec := func(edit func(*gantry.GlobalQueueSpec)) *gantry.GlobalQueueSpec {
		s := &gantry.GlobalQueueSpec{NamespaceSelector: &metav1.LabelSelector{},
			Clusters: []gantry.ClusterQuota{{Name: "w1", Quota: gpus(4)}, {Name: "w2", Quota: gpus(4)}}}
		if edit != nil {
			edit(s)
		}
		return s
	}
	cases := map[string]struct {
		was, now *gantry.GlobalQueueSpec
		want     bool
	}{
		"the same":             {was: spec(nil), now: spec(nil), want: true},
		"grown on one cluster": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) { s.Clusters[1].Quota = gpus(6) }), want: true},
		"a limit removed":      {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) { s.Clusters[0].Quota = nil }), want: true},
		"shrunk":               {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) { s.Clusters[1].Quota = gpus(3) })},
		"a limit added": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) {
			s.Clusters[0].Quota[corev1.ResourceCPU] = resource.MustParse("100")
		})},
		"a cluster added": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) {
			s.Clusters = append(s.Clusters, gantry.ClusterQuota{Name: "w3", Quota: gpus(4)})
		})},
		"a cluster renamed": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) { s.Clusters[1].Name = "w3" })},
		"in a cohort": {was: spec(func(s *gantry.GlobalQueueSpec) { s.Cohort = "co" }),
			now: spec(func(s *gantry.GlobalQueueSpec) { s.Cohort = "co"; s.Clusters[1].Quota = gpus(6) })},
		"a borrowing limit": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) { s.Clusters[0].BorrowingLimit = gpus(1) })},
		"grown, and StrictFIFO": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) {
			s.Clusters[1].Quota, s.QueueingStrategy = gpus(6), gantry.StrictFIFO
		})},
		"grown, and another namespace selector": {was: spec(nil), now: spec(func(s *gantry.GlobalQueueSpec) {
			s.Clusters[1].Quota, s.NamespaceSelector = gpus(6), nil
		})},
	}
	for name, tc := range cases {
		if got := quotaGrew(tc.was, tc.now); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
