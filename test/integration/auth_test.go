package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// accessFault is a way to take the hub's access to a worker away, and to give it back.
type accessFault struct {
	// take makes the worker refuse the hub.
	take func(t *testing.T, w *cluster)
	// giveBack lets the hub in again; it returns the kubeconfig to register, or nil to keep the Secret.
	giveBack func(t *testing.T, w *cluster) []byte
	// message is what the Connected condition says while the fault lasts.
	message string
}

// TestARevokedTokenHoldsEverythingUntilTheSecretIsRotated: the hub's ServiceAccount token on the
// winner is revoked (the ServiceAccount deleted, so the worker answers 401) while its job runs. The
// cluster shows Connected=False (Unauthorized), nothing of the job is deleted or dispatched again;
// a Secret rotated to a new token is picked up without a restart and the job finishes where it ran.
func TestARevokedTokenHoldsEverythingUntilTheSecretIsRotated(t *testing.T) {
	holdsThroughAnAccessFault(t, accessFault{
		take: func(t *testing.T, w *cluster) {
			if err := w.client.Delete(context.Background(), hubServiceAccount()); err != nil {
				t.Fatal(err)
			}
		},
		giveBack: func(t *testing.T, w *cluster) []byte {
			ctx := context.Background()
			if err := w.client.Create(ctx, hubServiceAccount()); err != nil {
				t.Fatal(err)
			}
			kc, err := serviceAccountKubeconfig(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			return kc
		},
		message: "the worker refuses the hub's token (401)",
	})
}

// TestARemovedRoleBindingHoldsEverythingUntilItIsRestored: the binding that grants the hub its rights
// on the winner is removed while its job runs (the worker answers 403). The cluster shows
// Connected=False (Unauthorized) naming what the hub lacks, nothing of the job is deleted or dispatched
// again; once the binding is back the hub reconnects by itself and the job finishes where it ran.
func TestARemovedRoleBindingHoldsEverythingUntilItIsRestored(t *testing.T) {
	holdsThroughAnAccessFault(t, accessFault{
		take: func(t *testing.T, w *cluster) {
			if err := w.client.Delete(context.Background(), hubBinding()); err != nil {
				t.Fatal(err)
			}
		},
		giveBack: func(t *testing.T, w *cluster) []byte {
			if err := w.client.Create(context.Background(), hubBinding()); err != nil {
				t.Fatal(err)
			}
			return nil
		},
		message: "the hub's identity lacks rights on the worker: ",
	})
}

// holdsThroughAnAccessFault runs a job on worker-1, reached with the ServiceAccount of
// deploy/worker/hub-access.yaml, takes the hub's access away and gives it back, and checks the history
// of the job's objects on both workers and on the hub: the Job and the copy on worker-1 are the same
// objects throughout and never deleted, nothing is created on worker-2, the winner and the epoch never
// change, and the job completes.
func holdsThroughAnAccessFault(t *testing.T, fault accessFault) {
	ctx := context.Background()
	w := workers["worker-1"]
	installHubAccess(t, w)
	rh := startHub(t)
	kc, err := serviceAccountKubeconfig(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	swapKubeconfig(t, rh, "worker-1", kc)
	connected(t, "worker-1", gantry.ReasonAllowlistOnly)

	newGlobalQueue(t, "access", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "access")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "held", 1, 1)
	submit(t, job)
	if where := runsOn(t, job); where != "worker-1" {
		t.Fatalf("runs on %s", where)
	}
	startRemote(t, "worker-1", job)
	hist := record(t, ns)

	fault.take(t, w)
	eventuallyWithin(t, 2*time.Minute, "worker-1 refusing the hub", func() error {
		c := workerCondition(t, "worker-1", gantry.ClusterConnected)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != gantry.ReasonUnauthorized || !strings.HasPrefix(c.Message, fault.message) {
			return fmt.Errorf("connected condition %+v", c)
		}
		t.Logf("worker-1 refuses the hub: %s", c.Message)
		return nil
	})
	eventually(t, "the workload saying its cluster is unreachable", func() error {
		c := workloadCondition(t, ns, jobkind.WorkloadName(jobkind.Job{}, job.Name), gantry.WorkloadClusterReachable)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "worker-1 is unreachable (Unauthorized)") {
			return fmt.Errorf("ClusterReachable %+v", c)
		}
		return nil
	})
	// Give the dispatcher and the workload controller passes over the refused cluster.
	consistently(t, "the job held on worker-1", 3*time.Second, func() error {
		if where, err := remoteJobs(job); err != nil || len(where) != 1 || where[0] != "worker-1" {
			return fmt.Errorf("job on %v (%v)", where, err)
		}
		return nil
	})

	if kc := fault.giveBack(t, w); kc != nil {
		setKubeconfig(t, "worker-1", kc)
	}
	connected(t, "worker-1", gantry.ReasonAllowlistOnly)
	completeRemote(t, "worker-1", job)
	hubJobComplete(t, job)
	hist.check(t, job)
}

func hubServiceAccount() *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "gantry-hub-remote", Namespace: gantry.GantryNamespace}}
}

// hubBinding is the ClusterRoleBinding of deploy/worker/hub-access.yaml.
func hubBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gantry-hub-remote"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gantry-hub-remote"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gantry-hub-remote", Namespace: gantry.GantryNamespace}},
	}
}

func workerCondition(t *testing.T, name, typ string) *metav1.Condition {
	t.Helper()
	var wc gantry.WorkerCluster
	if err := hubEnv.client.Get(context.Background(), types.NamespacedName{Name: name}, &wc); err != nil {
		t.Fatal(err)
	}
	return apimeta.FindStatusCondition(wc.Status.Conditions, typ)
}

// connected waits until the hub is connected to the worker with the LeastPrivilege reason given, which
// tells which identity it connected with.
func connected(t *testing.T, name, leastPrivilege string) {
	t.Helper()
	eventuallyWithin(t, 2*time.Minute, name+" connected ("+leastPrivilege+")", func() error {
		c := workerCondition(t, name, gantry.ClusterConnected)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("connected condition %+v", c)
		}
		if c := workerCondition(t, name, gantry.ClusterLeastPrivilege); c == nil || c.Reason != leastPrivilege {
			return fmt.Errorf("least privilege condition %+v", c)
		}
		return nil
	})
}

// startRemote plays the worker's Job controller: the Job's pods run; it waits until the hub Job shows it.
func startRemote(t *testing.T, cluster string, job *batchv1.Job) {
	t.Helper()
	c := workers[cluster].client
	eventually(t, "starting "+job.Name+" on "+cluster, func() error {
		var j batchv1.Job
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		now := metav1.Now()
		j.Status.StartTime, j.Status.Active = &now, 1
		return c.Status().Update(context.Background(), &j)
	})
	eventually(t, "the hub job running", func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if j.Status.Active != 1 {
			return fmt.Errorf("status %+v", j.Status)
		}
		return nil
	})
}

// sighting is one watch event of a Job, a copy or a hub Workload.
type sighting struct {
	where, kind string
	event       watch.EventType
	uid         types.UID
	deleting    bool
	winner      string
	epoch       int64
	evictions   int
}

// history records every watch event of the Jobs and Workloads of a namespace on the hub and on every
// worker, from the moment it starts (the objects there first appear as added).
type history struct {
	mu        sync.Mutex
	sightings []sighting
	closed    []string // watches that ended before the check
	stop      context.CancelFunc
	done      sync.WaitGroup
}

func record(t *testing.T, ns string) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{stop: cancel}
	t.Cleanup(h.finish)
	all := map[string]*cluster{"hub": hubEnv}
	for n, w := range workers {
		all[n] = w
	}
	for where, c := range all {
		wc, err := client.NewWithWatch(c.cfg, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		for kind, list := range map[string]client.ObjectList{"Job": &batchv1.JobList{}, "Workload": &gantry.WorkloadList{}} {
			wi, err := wc.Watch(ctx, list, client.InNamespace(ns))
			if err != nil {
				t.Fatal(err)
			}
			h.done.Add(1)
			go h.follow(ctx, where, kind, wi)
		}
	}
	return h
}

func (h *history) follow(ctx context.Context, where, kind string, wi watch.Interface) {
	defer h.done.Done()
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-wi.ResultChan():
			if !ok {
				h.mu.Lock()
				h.closed = append(h.closed, where+" "+kind)
				h.mu.Unlock()
				return
			}
			o, isObject := ev.Object.(client.Object)
			if !isObject {
				continue
			}
			s := sighting{where: where, kind: kind, event: ev.Type, uid: o.GetUID(), deleting: o.GetDeletionTimestamp() != nil}
			if wl, ok := o.(*gantry.Workload); ok {
				s.winner, s.epoch, s.evictions = wl.Status.Winner(), wl.Status.DispatchEpoch, len(wl.Status.Evictions)
			}
			h.mu.Lock()
			h.sightings = append(h.sightings, s)
			h.mu.Unlock()
		}
	}
}

func (h *history) finish() {
	h.stop()
	h.done.Wait()
}

// check stops the recording and validates it: on worker-1 one Job and one copy, never deleted; nothing
// on worker-2; on the hub one Workload, always won by worker-1 in one epoch, never evicted.
func (h *history) check(t *testing.T, job *batchv1.Job) {
	t.Helper()
	h.finish()
	if len(h.closed) > 0 {
		t.Fatalf("watches ended before the check: %v", h.closed)
	}
	uids := map[string]map[types.UID]bool{}
	epochs := map[int64]bool{}
	for _, s := range h.sightings {
		key := s.where + " " + s.kind
		if uids[key] == nil {
			uids[key] = map[types.UID]bool{}
		}
		uids[key][s.uid] = true
		switch {
		case s.where == "worker-2":
			t.Errorf("%s %s on worker-2: the job was dispatched elsewhere", s.event, s.kind)
		case s.event == watch.Deleted || s.deleting:
			t.Errorf("%s %s on %s being deleted (%s)", s.kind, s.uid, s.where, s.event)
		case s.where == "hub" && s.kind == "Workload":
			epochs[s.epoch] = true
			if s.winner != "worker-1" || s.evictions > 0 {
				t.Errorf("hub workload won by %q with %d evictions", s.winner, s.evictions)
			}
		}
	}
	for _, key := range []string{"worker-1 Job", "worker-1 Workload", "hub Job", "hub Workload"} {
		if len(uids[key]) != 1 {
			t.Errorf("%s: %d objects seen, want the same one throughout", key, len(uids[key]))
		}
	}
	if len(epochs) != 1 {
		t.Errorf("hub workload in epochs %v, want one", epochs)
	}
	t.Logf("%d watch events of %s checked", len(h.sightings), job.Name)
}
