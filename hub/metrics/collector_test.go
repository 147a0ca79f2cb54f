package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

// workload builds a hub Workload in namespace ns submitted to Queue q, created age ago.
func workload(ns, name, q string, age time.Duration, conds ...metav1.Condition) gantry.Workload {
	return gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
		Spec: gantry.WorkloadSpec{QueueName: q}, Status: gantry.WorkloadStatus{Conditions: conds}}
}

func pendingFor(reason string) metav1.Condition {
	return condition(gantry.WorkloadPending, metav1.ConditionTrue, reason)
}

func admittedOn(wl gantry.Workload, gq, cluster string) gantry.Workload {
	wl.Status.GlobalQueue, wl.Status.ClusterName = gq, cluster
	return wl
}

func globalQueue(name string, clusters ...gantry.ClusterQuota) gantry.GlobalQueue {
	return gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gantry.GlobalQueueSpec{Clusters: clusters}}
}

func queue(ns, name, gq string) gantry.Queue {
	return gantry.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gantry.QueueSpec{GlobalQueue: gq}}
}

func workerCluster(name string, conds ...metav1.Condition) gantry.WorkerCluster {
	return gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: gantry.WorkerClusterStatus{Conditions: conds}}
}

// exposition renders samples in the text format, each family with the help and type the Collector
// gives it, so that a case lists only its samples.
func exposition(samples ...string) string {
	byName := map[string][]string{}
	for _, s := range samples {
		name := s[:strings.IndexAny(s, "{ ")]
		byName[name] = append(byName[name], s)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", n, helps[n], n)
		for _, s := range byName[n] {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

func sourceOf(objs objects) Source {
	return Source{Reader: staticReader{objs}, Leading: func() bool { return true }, Clock: fixedClock(now)}
}

func TestCollectWorkloads(t *testing.T) {
	names := []string{"gantry_hub_workloads", "gantry_hub_pending_workloads", "gantry_hub_oldest_pending_workload_age_seconds"}
	deleting := workload("ns", "deleting", "q", time.Hour)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	finished := admittedOn(workload("ns", "done", "q", 3*time.Hour, condition(gantry.WorkloadFinished, metav1.ConditionTrue, gantry.ReasonJobSucceeded)), "gpu", "w1")
	repointed := workload("ns", "repointed", "q", 2*time.Hour, pendingFor(gantry.ReasonWaitingForAdmission))
	repointed.Status.GlobalQueue = "cpu" // nominated under cpu before its Queue was pointed at gpu
	for _, tc := range []struct {
		name    string
		objs    objects
		leading bool
		want    []string
	}{{
		name:    "a replica that does not lead exports nothing",
		objs:    objects{globals: []gantry.GlobalQueue{globalQueue("gpu")}},
		leading: false,
	}, {
		name:    "an empty GlobalQueue has zeros",
		objs:    objects{globals: []gantry.GlobalQueue{globalQueue("gpu")}},
		leading: true,
		want: []string{`gantry_hub_workloads{global_queue="gpu",state="pending"} 0`, `gantry_hub_workloads{global_queue="gpu",state="admitted"} 0`,
			`gantry_hub_workloads{global_queue="gpu",state="finished"} 0`, `gantry_hub_oldest_pending_workload_age_seconds{global_queue="gpu"} 0`},
	}, {
		name: "workloads by state and reason; pending ones under the GlobalQueue their Queue names now",
		objs: objects{
			globals: []gantry.GlobalQueue{globalQueue("gpu"), globalQueue("cpu")},
			queues:  []gantry.Queue{queue("ns", "q", "gpu")},
			workloads: []gantry.Workload{
				workload("ns", "new", "q", time.Minute),
				workload("ns", "quota", "q", 10*time.Minute, pendingFor(gantry.ReasonWaitingForQuota)),
				workload("ns", "odd", "q", 5*time.Minute, pendingFor("SomethingNew")),
				repointed,
				admittedOn(workload("ns", "running", "q", time.Hour), "cpu", "w1"),
				finished, deleting,
				workload("other", "lost", "missing", 30*time.Minute, pendingFor(gantry.ReasonQueueNotFound)),
			},
		},
		leading: true,
		want: []string{
			`gantry_hub_workloads{global_queue="gpu",state="pending"} 4`, `gantry_hub_workloads{global_queue="gpu",state="admitted"} 0`,
			`gantry_hub_workloads{global_queue="gpu",state="finished"} 1`,
			`gantry_hub_workloads{global_queue="cpu",state="pending"} 0`, `gantry_hub_workloads{global_queue="cpu",state="admitted"} 1`,
			`gantry_hub_workloads{global_queue="cpu",state="finished"} 0`,
			`gantry_hub_workloads{global_queue="",state="pending"} 1`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="New"} 1`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="WaitingForQuota"} 1`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="Other"} 1`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="WaitingForAdmission"} 1`,
			`gantry_hub_pending_workloads{global_queue="",reason="QueueNotFound"} 1`,
			`gantry_hub_oldest_pending_workload_age_seconds{global_queue="gpu"} 7200`,
			`gantry_hub_oldest_pending_workload_age_seconds{global_queue="cpu"} 0`,
			`gantry_hub_oldest_pending_workload_age_seconds{global_queue=""} 1800`,
		},
	}, {
		name: "a stopped workload counts as pending, Stopped, but not in the oldest pending age",
		objs: objects{
			globals: []gantry.GlobalQueue{globalQueue("gpu")},
			queues:  []gantry.Queue{queue("ns", "q", "gpu")},
			workloads: []gantry.Workload{
				func() gantry.Workload {
					wl := workload("ns", "stopped", "q", 5*time.Hour, pendingFor(gantry.ReasonStopped))
					wl.Spec.Stopped = true
					return wl
				}(),
				workload("ns", "quota", "q", 10*time.Minute, pendingFor(gantry.ReasonWaitingForQuota)),
			},
		},
		leading: true,
		want: []string{
			`gantry_hub_workloads{global_queue="gpu",state="pending"} 2`, `gantry_hub_workloads{global_queue="gpu",state="admitted"} 0`,
			`gantry_hub_workloads{global_queue="gpu",state="finished"} 0`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="Stopped"} 1`,
			`gantry_hub_pending_workloads{global_queue="gpu",reason="WaitingForQuota"} 1`,
			`gantry_hub_oldest_pending_workload_age_seconds{global_queue="gpu"} 600`,
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			src := sourceOf(tc.objs)
			src.Leading = func() bool { return tc.leading }
			if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(exposition(tc.want...)), names...); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestCollectQuota(t *testing.T) {
	quota := func(pairs ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(pairs); i += 2 {
			l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
		}
		return l
	}
	gq := globalQueue("gpu", gantry.ClusterQuota{Name: "w1", Quota: quota("nvidia.com/gpu", "16", "cpu", "500m")},
		gantry.ClusterQuota{Name: "w2", Quota: quota("memory", "1Gi")})
	gq.Status.Usage = []gantry.ClusterUsage{{Name: "w1", Admitted: quota("nvidia.com/gpu", "8", "example.com/other", "3"),
		Reserved: quota("nvidia.com/gpu", "4", "cpu", "250m")}}
	want := []string{
		`gantry_hub_global_queue_quota{cluster="w1",global_queue="gpu",resource="nvidia.com/gpu"} 16`,
		`gantry_hub_global_queue_quota{cluster="w1",global_queue="gpu",resource="cpu"} 0.5`,
		`gantry_hub_global_queue_quota{cluster="w2",global_queue="gpu",resource="memory"} 1.073741824e+09`,
		`gantry_hub_global_queue_used{cluster="w1",global_queue="gpu",resource="nvidia.com/gpu"} 8`,
		`gantry_hub_global_queue_used{cluster="w1",global_queue="gpu",resource="cpu"} 0`,
		`gantry_hub_global_queue_used{cluster="w2",global_queue="gpu",resource="memory"} 0`,
		`gantry_hub_global_queue_reserved{cluster="w1",global_queue="gpu",resource="nvidia.com/gpu"} 4`,
		`gantry_hub_global_queue_reserved{cluster="w1",global_queue="gpu",resource="cpu"} 0.25`,
		`gantry_hub_global_queue_reserved{cluster="w2",global_queue="gpu",resource="memory"} 0`,
	}
	c := NewCollector(sourceOf(objects{globals: []gantry.GlobalQueue{gq}}))
	if err := testutil.CollectAndCompare(c, strings.NewReader(exposition(want...)),
		"gantry_hub_global_queue_quota", "gantry_hub_global_queue_used", "gantry_hub_global_queue_reserved"); err != nil {
		t.Error(err)
	}
}

func TestCollectClusters(t *testing.T) {
	connected := condition(gantry.ClusterConnected, metav1.ConditionTrue, gantry.ReasonConnected)
	reporting := condition(gantry.ClusterAgentReady, metav1.ConditionTrue, gantry.ReasonAgentReporting)
	up := workerCluster("up", connected, reporting)
	up.Spec.Failover = gantry.Failover{Policy: gantry.FailoverFence, Timeout: &metav1.Duration{Duration: time.Minute}}
	up.Status.Capacity = &gantry.CapacitySummary{GPUProducts: []gantry.GPUProductCapacity{
		{Product: "A100", Allocatable: 16, Free: 4}, {Product: "H100", Allocatable: 8, Free: 8}}}
	refused := workerCluster("refused", condition(gantry.ClusterConnected, metav1.ConditionFalse, gantry.ReasonUnauthorized),
		condition(gantry.ClusterAgentReady, metav1.ConditionUnknown, gantry.ReasonUnreachable))
	// The connection went; the hub has not written why yet.
	dropped := workerCluster("dropped", connected, condition(gantry.ClusterAgentReady, metav1.ConditionFalse, gantry.ReasonReportStale))
	odd := workerCluster("odd", condition(gantry.ClusterConnected, metav1.ConditionFalse, "SomethingNew"))
	src := sourceOf(objects{clusters: []gantry.WorkerCluster{up, refused, dropped, odd},
		workloads: []gantry.Workload{admittedOn(workload("ns", "a", "q", time.Hour), "gpu", "up"), refusedJob(admittedOn(workload("ns", "b", "q", time.Hour), "gpu", "up"))}})
	src.Connected = func(c string) bool { return c == "up" }
	src.LastContact = func(c string) time.Time {
		if c == "odd" {
			return time.Time{}
		}
		return now.Add(-90 * time.Second)
	}
	src.LeaseRenewed = func(c string) (time.Time, bool) { return now.Add(-20 * time.Second), c == "up" || c == "dropped" }
	want := []string{
		`gantry_hub_worker_cluster_connected{cluster="up",reason="Connected"} 1`,
		`gantry_hub_worker_cluster_connected{cluster="refused",reason="Unauthorized"} 0`,
		`gantry_hub_worker_cluster_connected{cluster="dropped",reason="Unknown"} 0`,
		`gantry_hub_worker_cluster_connected{cluster="odd",reason="Other"} 0`,
		`gantry_hub_worker_cluster_agent_ready{cluster="up",reason="AgentReporting"} 1`,
		`gantry_hub_worker_cluster_agent_ready{cluster="refused",reason="Unreachable"} 0`,
		`gantry_hub_worker_cluster_agent_ready{cluster="dropped",reason="ReportStale"} 0`,
		`gantry_hub_worker_cluster_agent_ready{cluster="odd",reason="Unknown"} 0`,
		fmt.Sprintf(`gantry_hub_worker_cluster_last_contact_timestamp_seconds{cluster="up"} %d`, now.Unix()-90),
		fmt.Sprintf(`gantry_hub_worker_cluster_last_contact_timestamp_seconds{cluster="refused"} %d`, now.Unix()-90),
		fmt.Sprintf(`gantry_hub_worker_cluster_last_contact_timestamp_seconds{cluster="dropped"} %d`, now.Unix()-90),
		`gantry_hub_worker_cluster_lease_age_seconds{cluster="up"} 20`,
		`gantry_hub_worker_cluster_lease_age_seconds{cluster="dropped"} 20`,
		`gantry_hub_worker_cluster_failover_timeout_seconds{cluster="up",policy="Fence"} 60`,
		`gantry_hub_worker_cluster_failover_timeout_seconds{cluster="refused",policy="Wait"} 300`,
		`gantry_hub_worker_cluster_failover_timeout_seconds{cluster="dropped",policy="Wait"} 300`,
		`gantry_hub_worker_cluster_failover_timeout_seconds{cluster="odd",policy="Wait"} 300`,
		`gantry_hub_worker_cluster_gpus_allocatable{cluster="up",product="A100"} 16`,
		`gantry_hub_worker_cluster_gpus_allocatable{cluster="up",product="H100"} 8`,
		`gantry_hub_worker_cluster_gpus_free{cluster="up",product="A100"} 4`,
		`gantry_hub_worker_cluster_gpus_free{cluster="up",product="H100"} 8`,
		`gantry_hub_worker_cluster_admitted_workloads{cluster="up"} 2`,
		`gantry_hub_worker_cluster_admitted_workloads{cluster="refused"} 0`,
		`gantry_hub_worker_cluster_admitted_workloads{cluster="dropped"} 0`,
		`gantry_hub_worker_cluster_admitted_workloads{cluster="odd"} 0`,
		`gantry_hub_worker_cluster_refusing_workloads{cluster="up"} 1`,
		`gantry_hub_worker_cluster_refusing_workloads{cluster="refused"} 0`,
		`gantry_hub_worker_cluster_refusing_workloads{cluster="dropped"} 0`,
		`gantry_hub_worker_cluster_refusing_workloads{cluster="odd"} 0`,
	}
	var names []string
	for n := range helps {
		if strings.HasPrefix(n, "gantry_hub_worker_cluster_") {
			names = append(names, n)
		}
	}
	if err := testutil.CollectAndCompare(NewCollector(src), strings.NewReader(exposition(want...)), names...); err != nil {
		t.Error(err)
	}
}

// A worker that reports more GPU products than MaxGPUProducts exports the first by name only.
func TestCollectGPUProductsAreBounded(t *testing.T) {
	wc := workerCluster("w")
	wc.Status.Capacity = &gantry.CapacitySummary{}
	for i := range 3 * MaxGPUProducts {
		wc.Status.Capacity.GPUProducts = append(wc.Status.Capacity.GPUProducts, gantry.GPUProductCapacity{Product: fmt.Sprintf("p%03d", 3*MaxGPUProducts-i)})
	}
	c := NewCollector(sourceOf(objects{clusters: []gantry.WorkerCluster{wc}}))
	if n := testutil.CollectAndCount(c, "gantry_hub_worker_cluster_gpus_free"); n != MaxGPUProducts {
		t.Errorf("%d series of free GPUs, want %d", n, MaxGPUProducts)
	}
}

// The series a scrape exports do not grow with the number of workloads, and none names a workload, a
// job or a namespace.
func TestSeriesDoNotGrowWithWorkloads(t *testing.T) {
	reasons := append(append([]string{}, PendingReasons...), "Unheard-of", "")
	build := func(n int) (objects, map[string]bool) {
		gq := globalQueue("gpu", gantry.ClusterQuota{Name: "w1", Quota: corev1.ResourceList{gantry.GPUResource: resource.MustParse("8")}})
		objs := objects{globals: []gantry.GlobalQueue{gq}, clusters: []gantry.WorkerCluster{workerCluster("w1")}}
		names := map[string]bool{}
		for i := range n {
			ns, name := fmt.Sprintf("team-%d", i), fmt.Sprintf("job-%d", i)
			objs.queues = append(objs.queues, queue(ns, "q", "gpu"))
			wl := workload(ns, name, "q", time.Duration(i)*time.Second, pendingFor(reasons[i%len(reasons)]))
			switch i % 3 {
			case 1:
				wl = admittedOn(wl, "gpu", "w1")
			case 2:
				wl = admittedOn(wl, "gpu", "w1")
				wl.Status.Conditions = append(wl.Status.Conditions, condition(gantry.WorkloadFinished, metav1.ConditionTrue, "Unheard-of"))
			}
			objs.workloads = append(objs.workloads, wl)
			names[ns], names[name] = true, true
		}
		return objs, names
	}
	series := func(objs objects, names map[string]bool) int {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(NewCollector(sourceOf(objs)))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				n++
				for _, l := range m.GetLabel() {
					if names[l.GetValue()] {
						t.Errorf("%s has label %s=%s, the name of a workload or namespace", mf.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
		return n
	}
	few, fewNames := build(3 * len(reasons))
	many, manyNames := build(300 * len(reasons))
	if a, b := series(few, fewNames), series(many, manyNames); a != b {
		t.Errorf("%d series for %d workloads, %d for %d", a, len(few.workloads), b, len(many.workloads))
	}
}

// refusedJob makes an admitted Workload's winner refuse its Job for now.
func refusedJob(wl gantry.Workload) gantry.Workload {
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: gantry.WorkloadJobCreated, Status: metav1.ConditionFalse,
		Reason: gantry.ReasonWorkerRefusing, Message: "exceeded quota"})
	return wl
}
