package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// watched are the watches of a hub: one per kind of list, which the test sends changes on.
type watched map[string]*watch.FakeWatcher

func (w watched) of(list client.ObjectList) *watch.FakeWatcher { return w[fmt.Sprintf("%T", list)] }

// watchOutput runs kubectl gantry args against the fleet, sends changes on its watches, then stops it
// and returns what it printed. Each change is sent once the command took the one before, so it prints
// what each changed before it is stopped.
func watchOutput(t *testing.T, args []string, changes func(watched)) string {
	t.Helper()
	hub := watched{}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(fleet(), jobSets()...)...).Build(),
		interceptor.Funcs{Watch: func(_ context.Context, _ client.WithWatch, list client.ObjectList, _ ...client.ListOption) (watch.Interface, error) {
			if w, ok := hub[fmt.Sprintf("%T", list)]; ok {
				return w, nil
			}
			return watch.NewFake(), nil
		}})
	for _, list := range []client.ObjectList{&gantry.GlobalQueueList{}, &gantry.WorkerClusterList{}, &gantry.WorkloadList{},
		&gantry.QueueList{}, &batchv1.JobList{}} {
		hub[fmt.Sprintf("%T", list)] = watch.NewFake()
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- runIn(ctx, c, &out, args...) }()
	sent := make(chan struct{})
	go func() { changes(hub); close(sent) }()
	select {
	case <-sent:
		stop()
		if err := <-done; err != nil {
			t.Fatalf("kubectl gantry %s: %v", strings.Join(args, " "), err)
		}
	case err := <-done:
		t.Fatalf("kubectl gantry %s ended before the changes were sent: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// object is the fleet's object of that name, to change.
func object[T client.Object](name string) T {
	for _, obj := range append(fleet(), jobSets()...) {
		if o, ok := obj.(T); ok && o.GetName() == name {
			return o
		}
	}
	panic("no " + name + " in the fleet")
}

// -w prints the table, then, for each change, the rows it changed, made or took away (as they were
// last), and nothing for a change no row shows.
func TestWatchGoldens(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		changes func(watched)
	}{
		"queues-watch": {args: []string{"queues", "-w"}, changes: func(hub watched) {
			vision := object[*gantry.GlobalQueue]("vision")
			vision.Status.AdmittedWorkloads = 4
			hub.of(&gantry.GlobalQueueList{}).Modify(vision)
			vision = object[*gantry.GlobalQueue]("vision")
			vision.Status.AdmittedWorkloads, vision.Annotations = 4, map[string]string{"note": "not shown"}
			hub.of(&gantry.GlobalQueueList{}).Modify(vision)
			hub.of(&gantry.GlobalQueueList{}).Add(&gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: "cpus"},
				Spec: gantry.GlobalQueueSpec{Clusters: []gantry.ClusterQuota{{Name: "worker-2"}}}})
			hub.of(&gantry.GlobalQueueList{}).Delete(object[*gantry.GlobalQueue]("gpus"))
		}},
		"jobs-watch": {args: []string{"jobs", "-n", "team-a", "-w"}, changes: func(hub watched) {
			b := object[*gantry.Workload]("job-b")
			b.Status = gantry.WorkloadStatus{ClusterName: "worker-1", DispatchEpoch: 1, GlobalQueue: "gpus", NominatedClusters: []string{"worker-1"},
				Conditions: []metav1.Condition{{Type: gantry.WorkloadAdmitted, Status: "True", Reason: gantry.ReasonAdmittedByCluster, LastTransitionTime: at(59)}}}
			hub.of(&gantry.WorkloadList{}).Modify(b)
			d := job("d")
			d.CreationTimestamp = at(59)
			hub.of(&batchv1.JobList{}).Add(d)
			hub.of(&batchv1.JobList{}).Delete(object[*batchv1.Job]("c"))
		}},
		"clusters-watch": {args: []string{"clusters", "-w"}, changes: func(hub watched) {
			w2 := object[*gantry.WorkerCluster]("worker-2")
			w2.Status.Conditions[0] = metav1.Condition{Type: gantry.ClusterConnected, Status: "True", Reason: "Connected"}
			hub.of(&gantry.WorkerClusterList{}).Modify(w2)
			b := object[*gantry.Workload]("job-b")
			b.Status.ClusterName, b.Status.DispatchEpoch = "worker-2", 1
			hub.of(&gantry.WorkloadList{}).Modify(b)
		}},
		"clusters-watch-name": {args: []string{"clusters", "-w", "-o", "name"}, changes: func(hub watched) {
			w2 := object[*gantry.WorkerCluster]("worker-2")
			w2.Spec.Cordoned = false
			hub.of(&gantry.WorkerClusterList{}).Modify(w2)
		}},
		"queues-watch-json": {args: []string{"queues", "-w", "-o", "json", "--sort-by", ".metadata.name"}, changes: func(hub watched) {
			vision := object[*gantry.GlobalQueue]("vision")
			vision.Spec.FairSharing.Weight = ptr.To[int32](3)
			hub.of(&gantry.GlobalQueueList{}).Modify(vision)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			golden(t, name, watchOutput(t, tc.args, tc.changes), tc.args)
		})
	}
}

// A watch the API server ends goes on from the last change it saw; an error it sends ends the command.
func TestWatchGoesOnAfterTheServerEndsIt(t *testing.T) {
	var out bytes.Buffer
	l, err := readQueues(context.Background(), fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(fleet()...).Build())
	if err != nil {
		t.Fatal(err)
	}
	first, second := watch.NewFake(), watch.NewFake()
	var reopenedFrom string
	o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	o.Now = func() time.Time { return start }
	emitted := 0
	emit := func(_ []metav1.TableColumnDefinition, rows []metav1.TableRow) error { emitted += len(rows); return nil }
	done := make(chan error, 1)
	go func() {
		done <- o.follow(context.Background(), l, []watch.Interface{first}, func(int) (watch.Interface, error) {
			reopenedFrom = l.feeds[0].version
			return second, nil
		}, emit, keyRows(l.table(start)))
	}()
	vision := object[*gantry.GlobalQueue]("vision")
	vision.ResourceVersion, vision.Status.AdmittedWorkloads = "1000", 4
	first.Modify(vision)
	first.Stop()
	second.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "watching GlobalQueues on the hub: too old resource version") {
		t.Errorf("follow ended with %v, want the watch's error", err)
	}
	if reopenedFrom != "1000" || emitted != 1 {
		t.Errorf("reopened from %q after %d rows, want from 1000 after vision's row", reopenedFrom, emitted)
	}
}
