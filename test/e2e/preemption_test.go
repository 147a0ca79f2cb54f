package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// Two preemptions at once, on whole clusters. On worker-1, four low-priority one-node jobs fill the GPU
// nodes; a high-priority gang of two whole nodes, with quota to spare, waits until the agent names two
// of them whose going would let it fit, and the hub preempts those. On worker-2, a queue borrows the
// 16 GPUs its cohort's lender leaves unused; the lender's job arrives and takes back what it needs. In
// the workers' etcd ledger, every pod of each victim is deleted before the first pod of the job it made
// room for exists, and no job ever runs in two places; the namespace's Usage counts the victims' runs,
// lost, as the ledgers show them.
func TestPreemptionMakesRoomOnlyOnceTheVictimsAreGone(t *testing.T) {
	ns := newNamespace(t, "e2e-preempt")
	dumpOnFailure(t, ns)
	low, high := priorityClassEverywhere(t, ns+"-low", 0), priorityClassEverywhere(t, ns+"-high", 1000)
	gpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{gantry.GPUResource: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	queue(t, ns, "gang", gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus(64)}},
		Preemption: gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerPriority}})
	queue(t, ns, "lender", gantry.GlobalQueueSpec{Cohort: ns, Clusters: []gantry.ClusterQuota{{Name: "worker-2", Quota: gpus(16)}},
		Preemption: gantry.PreemptionPolicy{ReclaimWithinCohort: gantry.PreemptLowerOrEqualPriority}})
	queue(t, ns, "borrower", gantry.GlobalQueueSpec{Cohort: ns, Clusters: []gantry.ClusterQuota{{Name: "worker-2", Quota: gpus(0)}}})

	var lows, borrowed []*batchv1.Job
	for i := range 4 {
		lows = append(lows, jobIn(makeJob(ns, fmt.Sprintf("low-%d", i)).gpus(8).runsFor("10m").priorityClass(low), "gang"))
	}
	for i := range 2 {
		borrowed = append(borrowed, jobIn(makeJob(ns, fmt.Sprintf("borrowed-%d", i)).gpus(8).runsFor("10m"), "borrower"))
	}
	for _, j := range append(slices.Clone(lows), borrowed...) {
		submit(t, j)
	}
	podsLive(t, ns, append(slices.Clone(lows), borrowed...), 3*time.Minute)

	urgent := jobIn(makeJob(ns, "urgent").pods(2).gpus(8).runsFor("10m").priorityClass(high), "gang")
	own := jobIn(makeJob(ns, "own").gpus(8).runsFor("10m"), "lender")
	submit(t, urgent)
	submit(t, own)
	// Each preemption waits for its victims' pods to be gone, one what-if and one eviction after another.
	podsLive(t, ns, []*batchv1.Job{urgent, own}, 6*time.Minute)

	checkVictimsGoneFirst(t, ns, "worker-1", lows, urgent, 2)
	checkVictimsGoneFirst(t, ns, "worker-2", borrowed, own, 1)
	checkOneRun(t, ns)
	checkUsage(t, ns) // the victims' runs, lost
}

// checkVictimsGoneFirst checks that exactly want of the jobs were preempted for preemptor, each once, and
// that the ledger of the cluster shows every pod of theirs deleted before the first pod of preemptor
// existed. A victim's eviction is recorded once a live read shows its Job gone, which may come after
// the preemptor's pods start (they wait for the victim's pods only), so the count is awaited.
func checkVictimsGoneFirst(t *testing.T, ns, cluster string, jobs []*batchv1.Job, preemptor *batchv1.Job, want int) {
	t.Helper()
	var preempted map[string][]string // workload UID -> epochs preempted in
	eventually(t, fmt.Sprintf("%d jobs preempted on %s for %s", want, cluster, preemptor.Name), 30*time.Second, poll, func() error {
		var err error
		if preempted, err = preemptedFor(ns, cluster, jobs, preemptor); err == nil && len(preempted) != want {
			err = fmt.Errorf("%d preempted", len(preempted))
		}
		return err
	})
	victims := map[string]string{} // workload UID -> epoch preempted
	for uid, epochs := range preempted {
		if len(epochs) > 1 {
			// Preempted, admitted again into the room it left, and preempted again: the room was not
			// held for the preemptor.
			t.Errorf("workload %s preempted %d times on %s for %s", uid, len(epochs), cluster, preemptor.Name)
		}
		victims[uid] = epochs[0]
	}
	pods := audit.Pods(ns)
	first := int64(-1)
	for _, r := range pods {
		if r.Cluster == cluster && strings.HasPrefix(r.Name, preemptor.Name+"-") && (first < 0 || r.Revision < first) {
			first = r.Revision
		}
	}
	last := map[string]testbed.PodRecord{} // each victim pod's last record before first
	for _, r := range pods {
		if epoch, ok := victims[r.WorkloadUID]; ok && r.Cluster == cluster && r.Epoch == epoch && r.Revision < first {
			if prev, seen := last[r.Name]; !seen || r.Revision > prev.Revision {
				last[r.Name] = r
			}
		}
	}
	if len(last) < want {
		t.Fatalf("the ledger shows %d pods of the %d victims on %s before %s's first", len(last), want, cluster, preemptor.Name)
	}
	for name, r := range last {
		if !r.Deleted {
			t.Errorf("victim pod %s on %s still there (phase %s) when %s's first pod was created (revision %d)", name, cluster, r.Phase, preemptor.Name, first)
		}
	}
	t.Logf("on %s: %d victim pods deleted before revision %d, where %s's first pod appears", cluster, len(last), first, preemptor.Name)
}

// preemptedFor maps the UID of each of the jobs' Workloads preempted on the cluster for preemptor to the
// epochs it was preempted in.
func preemptedFor(ns, cluster string, jobs []*batchv1.Job, preemptor *batchv1.Job) (map[string][]string, error) {
	preemptorKey := ns + "/" + jobkind.WorkloadName(jobkind.Job{}, preemptor.Name)
	victims := map[string][]string{}
	for _, j := range jobs {
		var wl gantry.Workload
		if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, j.Name)}, &wl); err != nil {
			return nil, err
		}
		for _, e := range wl.Status.Evictions {
			if e.Reason == gantry.ReasonPreempted && e.Cluster == cluster && strings.Contains(e.Message, preemptorKey) {
				victims[string(wl.UID)] = append(victims[string(wl.UID)], fmt.Sprint(e.Epoch))
			}
		}
	}
	return victims, nil
}

// podsLive waits until every pod of each job is live on a worker, as the ledger sees it.
func podsLive(t *testing.T, ns string, jobs []*batchv1.Job, timeout time.Duration) {
	t.Helper()
	eventually(t, "every pod running", timeout, poll, func() error {
		if err := audit.Sync(context.Background()); err != nil {
			return err
		}
		live := map[string]int32{}
		for _, r := range audit.Pods(ns) {
			if i := strings.LastIndex(r.Name, "-"); i > 0 && r.Live() {
				live[r.Name[:i]]++
			}
		}
		for _, j := range jobs {
			if n := live[j.Name]; n < *j.Spec.Parallelism {
				return fmt.Errorf("%s: %d pods live of %d", j.Name, n, *j.Spec.Parallelism)
			}
		}
		return nil
	})
}

// queue creates a GlobalQueue for the namespace only, and a Queue of the same name pointing at it.
func queue(t *testing.T, ns, name string, spec gantry.GlobalQueueSpec) {
	t.Helper()
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}
	create(t, &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Spec: spec})
	create(t, &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: gantry.QueueSpec{GlobalQueue: ns + "-" + name}})
}

func jobIn(b *jobBuilder, queue string) *batchv1.Job {
	job := b.obj()
	job.Labels[gantry.QueueLabel] = queue
	return job
}

func (b *jobBuilder) priorityClass(name string) *jobBuilder {
	b.job.Spec.Template.Spec.PriorityClassName = name
	return b
}

// priorityClassEverywhere creates a PriorityClass on the hub, which gives jobs their priority, and on
// every worker, where their pods name it.
func priorityClassEverywhere(t *testing.T, name string, value int32) string {
	t.Helper()
	clients := []client.Client{tb.Hub.Client}
	for _, w := range []string{"worker-1", "worker-2"} {
		clients = append(clients, tb.Worker(w).Client)
	}
	for _, c := range clients {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if err := c.Create(context.Background(), pc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), pc) })
	}
	return name
}
