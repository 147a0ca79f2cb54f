package dispatcher

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

// BenchmarkPass100kWaiting is the hub's whole pass over a deep queue at rest: 10 GlobalQueues on 100
// connected clusters, each queue's quota filled by its 400 running workloads, and 100,000 pending
// Workloads that already show the verdict the pass gives them. Nothing changes, so nothing is written,
// and every queue is parked (rest). Target: under 100 ms per pass.
func BenchmarkPass100kWaiting(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 4, 100_000)
	benchPass(b, d, workloads, 0, nil)
}

// BenchmarkPass100kWaitingOneQueueChanged is that pass when one workload of one queue changed since
// the last: that queue's 10,000 waiting workloads are walked, the other nine queues stay parked.
func BenchmarkPass100kWaitingOneQueueChanged(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 4, 100_000)
	var first *gantry.Workload
	for _, wl := range workloads {
		if wl.Spec.QueueName == "queue-00" && wl.Status.ClusterName == "" {
			first = wl
			break
		}
	}
	benchPass(b, d, workloads, 0, func(i int) {
		changed := first.DeepCopy()
		changed.ResourceVersion = fmt.Sprint(2 + i)
		d.queues.WorkloadChanged(keyOf(changed), changed)
	})
}

// BenchmarkPass100kOneQueueTurnsOver is a pass over one GlobalQueue of 100,000 waiting workloads on 100
// clusters whose quota stays full: since the last pass one of its running workloads finished and a
// waiting one was admitted in its place, so the queue is walked, up to where its settled tail is cut.
func BenchmarkPass100kOneQueueTurnsOver(b *testing.B) {
	d, workloads := benchHub(b, 100, 1, 4, 100_000)
	var running []*gantry.Workload
	for _, wl := range workloads {
		if wl.Status.ClusterName != "" {
			running = append(running, wl)
		}
	}
	benchPass(b, d, workloads, 0, func(i int) {
		gone := running[i%len(running)]
		d.queues.WorkloadChanged(keyOf(gone), nil)
		back := gone.DeepCopy()
		back.Name, back.UID, back.ResourceVersion = fmt.Sprintf("%s-%d", gone.Name, i), types.UID(fmt.Sprintf("%s-%d", gone.UID, i)), "1"
		running[i%len(running)] = back
		d.queues.WorkloadChanged(keyOf(back), back)
	})
}

// BenchmarkPass100kOneQueueQuotaGrows is the pass over one queue of 100,000 waiting after its quota
// grew on a cluster, by too little for any of them: it is walked up to its settled tail, not whole.
func BenchmarkPass100kOneQueueQuotaGrows(b *testing.B) {
	d, workloads := benchHub(b, 100, 1, 4, 100_000)
	c := d.Client.(*benchClient)
	benchPass(b, d, workloads, 0, func(i int) {
		gq := c.globals[0].DeepCopy() // a new object, as the cache hands out after an update
		quota := gq.Spec.Clusters[i%len(gq.Spec.Clusters)].Quota
		gpus := quota[gantry.GPUResource]
		gpus.Add(resource.MustParse("1m"))
		quota[gantry.GPUResource] = gpus
		gq.ResourceVersion = fmt.Sprint(i + 2)
		c.globals = []gantry.GlobalQueue{*gq}
	})
}

// BenchmarkPass100kWaitingWalked is the pass at rest that walks every workload, as the first pass
// and every Resync pass do, and one after any change of a spec or a cluster's availability.
func BenchmarkPass100kWaitingWalked(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 4, 100_000)
	benchPass(b, d, workloads, 0, func(int) { d.queues.Forget() })
}

// BenchmarkPass100kWaitingCountingQueues is the same pass when the queues' statuses are due, as they
// are at most once a second: it counts every workload into its queues' statuses too.
func BenchmarkPass100kWaitingCountingQueues(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 4, 100_000)
	benchPass(b, d, workloads, queueStatusInterval, nil)
}

// BenchmarkPass100kRunning is a pass over a hub at rest whose workloads mostly run: 10 GlobalQueues on
// 100 clusters, 100,000 running workloads that fill every queue's quota, and 1,000 waiting ones. Set
// against BenchmarkPass2kRunning, it shows what the running workloads add to a pass: their tallies,
// not they, are counted.
func BenchmarkPass100kRunning(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 100, 1_000)
	benchPass(b, d, workloads, 0, nil)
}

// BenchmarkPass100kRunningCountingQueues is the same pass when the queues' statuses are due.
func BenchmarkPass100kRunningCountingQueues(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 100, 1_000)
	benchPass(b, d, workloads, queueStatusInterval, nil)
}

// BenchmarkPass2kRunning is BenchmarkPass100kRunning with 2,000 running workloads (two per queue and
// cluster, the fewest whose quota holds the largest waiting one) instead of 100,000.
func BenchmarkPass2kRunning(b *testing.B) {
	d, workloads := benchHub(b, 100, 10, 2, 1_000)
	benchPass(b, d, workloads, 0, nil)
}

// benchPass runs passes over the hub at rest, the clock moving by step and before (nil: nothing)
// running before each.
func benchPass(b *testing.B, d *Dispatcher, workloads []*gantry.Workload, step time.Duration, before func(i int)) {
	clk := d.Clock.(*clocktesting.FakeClock)
	for _, wl := range workloads {
		d.queues.WorkloadChanged(keyOf(wl), wl)
	}
	ctx := context.Background()
	if _, err := d.pass(ctx); err != nil { // the book takes in the Workloads, the queues their statuses
		b.Fatal(err)
	}
	waitForSlots(b, d)
	d.Client.(*benchClient).writes = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clk.Step(step)
		if before != nil {
			before(i)
		}
		if _, err := d.pass(ctx); err != nil {
			b.Fatal(err)
		}
		if n := len(d.writers); n != 0 {
			b.Fatalf("a pass at rest started %d writes", n)
		}
		if n := d.Client.(*benchClient).writes; n != 0 {
			b.Fatalf("a pass at rest wrote %d queue statuses", n)
		}
	}
}

// benchHub is a Dispatcher over a hub of the given numbers of connected clusters, GlobalQueues (each
// with one Queue in namespace ns, and on every cluster quota filled by the given number of running
// workloads of 4 GPUs there) and pending Workloads, which show WaitingForQuota already. Its client
// holds all but the Workloads, which come back apart for its book.
func benchHub(b *testing.B, clusters, queues, running, pending int) (*Dispatcher, []*gantry.Workload) {
	b.Helper()
	copies := fakeCopies{connected: map[string]bool{}}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}}
	gpus := strconv.Itoa(4 * running)
	for c := range clusters {
		name := fmt.Sprintf("cluster-%03d", c)
		copies.connected[name] = true
		objs = append(objs, hubtest.MakeWorkerCluster(name).AgentReady().Obj())
	}
	for q := range queues {
		name := fmt.Sprintf("queue-%02d", q)
		gq := hubtest.MakeGlobalQueue(name).SelectAll()
		for c := range clusters {
			gq.Cluster(fmt.Sprintf("cluster-%03d", c), gantry.GPUResource, gpus)
		}
		objs = append(objs, gq.Obj(), hubtest.MakeQueue(name, "ns").GlobalQueue(name).Obj())
	}
	var workloads []*gantry.Workload
	for i := range queues * clusters * running {
		q, c := fmt.Sprintf("queue-%02d", i/(clusters*running)), fmt.Sprintf("cluster-%03d", i/running%clusters)
		wl := benchWorkload(fmt.Sprintf("running-%d", i), q, 4).Nominated(q, 1, c).Obj()
		wl.Status.ClusterName = c
		workloads = append(workloads, wl)
	}
	for i := range pending {
		q := fmt.Sprintf("queue-%02d", i%queues)
		workloads = append(workloads, benchWorkload(fmt.Sprintf("pending-%d", i), q, int64(1+i%8)).Priority(int32(i%3)).
			Created(at.Add(time.Duration(i)*time.Millisecond)).Pending(gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue "+q).Obj())
	}
	c := &benchClient{}
	for _, o := range objs {
		switch o := o.(type) {
		case *gantry.GlobalQueue:
			c.globals = append(c.globals, *o)
		case *gantry.Queue:
			c.queues = append(c.queues, *o)
		case *gantry.WorkerCluster:
			c.clusters = append(c.clusters, *o)
		case *corev1.Namespace:
			c.namespaces = append(c.namespaces, *o)
		}
	}
	d := &Dispatcher{Client: c, Workers: copies, Recorder: events.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(at.Time)}
	d.init()
	synced := func() bool { return true }
	d.follows.Store(&synced) // fed below, as the informer would
	return d, workloads
}

// benchWorkload starts a Workload of one pod with gpus GPUs, 8 CPUs and 32 GiB in all.
func benchWorkload(name, queue string, gpus int64) *hubtest.WorkloadWrapper {
	return hubtest.MakeWorkload(name, "ns").UID("uid-"+name).ResourceVersion("1").Created(at.Time).Queue(queue).
		PodSet("main", 1, gantry.GPUResource, strconv.FormatInt(gpus, 10), "cpu", "8", "memory", "32Gi")
}

// benchClient hands out the hub's objects as the cache does, without copying them, and takes status
// writes into them; it holds no Workloads, which a pass reads from its book.
type benchClient struct {
	client.Client // any other call fails
	globals       []gantry.GlobalQueue
	queues        []gantry.Queue
	clusters      []gantry.WorkerCluster
	namespaces    []corev1.Namespace
	writes        int
}

func (c *benchClient) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *gantry.GlobalQueueList:
		l.Items = c.globals
	case *gantry.QueueList:
		l.Items = c.queues
	case *gantry.WorkerClusterList:
		l.Items = c.clusters
	case *corev1.NamespaceList:
		l.Items = c.namespaces
	case *gantry.CohortList:
	default:
		return fmt.Errorf("a pass listed %T", list)
	}
	return nil
}

func (c *benchClient) Status() client.SubResourceWriter { return benchStatus{c} }

type benchStatus struct{ c *benchClient }

func (s benchStatus) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	s.c.writes++
	switch o := obj.(type) {
	case *gantry.GlobalQueue:
		for i := range s.c.globals {
			if s.c.globals[i].Name == o.Name {
				s.c.globals[i].Status = o.Status
			}
		}
	case *gantry.Queue:
		for i := range s.c.queues {
			if s.c.queues[i].Name == o.Name {
				s.c.queues[i].Status = o.Status
			}
		}
	default:
		return fmt.Errorf("a pass wrote %T", obj)
	}
	return nil
}

func (benchStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return fmt.Errorf("a pass created a subresource")
}

func (benchStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return fmt.Errorf("a pass patched a status")
}

func (benchStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("a pass applied a status")
}
