package remote

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// A connection tells from its informers' stores whether its cache holds a copy or a job under a key; a
// kind the worker does not serve is never held, and a connection that knows no stores may hold anything.
func TestAConnectionTellsWhatItsCacheHolds(t *testing.T) {
	copies, jobs := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc), toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := copies.Add(&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-a"}}); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Add(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{copies: copies, jobs: map[gantry.JobKind]toolscache.Store{gantry.JobKindJob: jobs}}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	for _, tc := range []struct {
		what string
		got  bool
		want bool
	}{
		{"the copy it holds", c.HoldsCopy(key("job-a")), true},
		{"a copy it does not hold", c.HoldsCopy(key("job-b")), false},
		{"the same name in another namespace", c.HoldsCopy(types.NamespacedName{Namespace: "other", Name: "job-a"}), false},
		{"the Job it holds", c.HoldsJob(gantry.JobKindJob, key("a")), true},
		{"a Job it does not hold", c.HoldsJob(gantry.JobKindJob, key("b")), false},
		{"a kind it does not serve", c.HoldsJob(gantry.JobKindJobSet, key("a")), false},
		{"a copy, knowing no stores", (&Cluster{}).HoldsCopy(key("job-b")), true},
		{"a Job, knowing no stores", (&Cluster{}).HoldsJob(gantry.JobKindJob, key("b")), true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: holds %v, want %v", tc.what, tc.got, tc.want)
		}
	}
}

// A connection hands out the copy its informer's store holds, the object itself, and nil for one it
// does not hold.
func TestAConnectionHandsOutTheCopyItHolds(t *testing.T) {
	copies := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	held := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-a"}}
	if err := copies.Add(held); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{copies: copies}
	if got := c.CopyInPlace(types.NamespacedName{Namespace: "ns", Name: "job-a"}); got != held {
		t.Errorf("the copy it holds: %p, want the store's %p", got, held)
	}
	if got := c.CopyInPlace(types.NamespacedName{Namespace: "ns", Name: "job-b"}); got != nil {
		t.Errorf("a copy it does not hold: %+v", got)
	}
}
