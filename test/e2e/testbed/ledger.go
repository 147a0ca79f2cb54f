package testbed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Where the API server stores batch Jobs, pods and Workloads in etcd: prefix + "<namespace>/<name>".
const (
	JobsPrefix      = "/registry/jobs/"
	PodsPrefix      = "/registry/pods/"
	WorkloadsPrefix = "/registry/gantry.dev/workloads/"
)

// JobRecord is the creation or deletion of one Job in one worker's etcd.
type JobRecord struct {
	Cluster   string
	Namespace string
	Name      string
	// Created is true for a write that created the key, false for a deletion.
	Created  bool
	Revision int64
	// Seen is when the watch delivered the record.
	Seen time.Time
}

// PodRecord is one write or deletion of a pod in one worker's etcd, as far as a double run can tell.
type PodRecord struct {
	Cluster   string
	Namespace string
	Name      string
	// WorkloadUID and Epoch are the pod's Gantry labels: the hub Workload and the dispatch epoch it runs for.
	WorkloadUID string
	Epoch       string
	// PodSet is the pod set the pod belongs to (gantry.dev/pod-set); PodGroup the PodGroup it joins
	// (spec.schedulingGroup), which its cluster's scheduler binds all or none.
	PodSet   string
	PodGroup string
	NodeName string
	Phase    corev1.PodPhase
	// GPUs is what the pod's containers request of gantry.GPUResource.
	GPUs     int64
	Deleted  bool
	Revision int64
	Seen     time.Time
}

// Live tells whether the pod, as this record leaves it, is on a node and has not ended.
func (r PodRecord) Live() bool {
	return !r.Deleted && r.NodeName != "" && r.Phase != corev1.PodSucceeded && r.Phase != corev1.PodFailed
}

// HubRecord is one write of a hub Job or Workload, as far as the promise can tell.
type HubRecord struct {
	Kind      string // "Job" or "Workload"
	Namespace string
	Name      string
	UID       string
	// Terminal is the hub Job's condition Complete or Failed that is True, if one is.
	Terminal batchv1.JobConditionType
	// Epoch and Winner are the Workload's dispatch epoch and the cluster it records as the winner; Queue
	// its Queue, and Runs the runs it records.
	Epoch  int64
	Winner string
	Queue  string
	Runs   []gantry.Run
	// CheckpointInterval is the job's, as its Workload's spec says.
	CheckpointInterval *metav1.Duration
	Revision           int64
	Seen               time.Time
}

// Ledger watches the etcd of every worker from the moment it starts, so it records every Job ever
// created there and every state of every pod, including objects deleted again before anyone listed
// them; and the hub's etcd, for every state of every hub Job and Workload.
type Ledger struct {
	hub     string
	mu      sync.Mutex
	records []JobRecord
	pods    []PodRecord
	// others are the pods that are not Gantry's: those users submit straight to a worker.
	others []PodRecord
	hubLog []HubRecord
	last   map[string]PodRecord // by cluster/namespace/name: a deleted pod's key carries no value
	synced map[string]int64     // highest revision each watch has delivered
	errs   []error

	clients map[string]*clientv3.Client
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// StartLedger starts watching the etcd of the hub and of each worker. Everything written after it
// returns is recorded: each watch starts from the revision the store had when it was set up.
func StartLedger(ctx context.Context, hub *Cluster, workers []*Cluster) (*Ledger, error) {
	wctx, cancel := context.WithCancel(context.Background())
	a := &Ledger{hub: hub.Name, synced: map[string]int64{}, clients: map[string]*clientv3.Client{}, cancel: cancel, last: map[string]PodRecord{}}
	for _, w := range append([]*Cluster{hub}, workers...) {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{w.EtcdURL},
			DialTimeout: 10 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("connecting to the etcd of %s at %s: %w", w.Name, w.EtcdURL, err)
		}
		a.clients[w.Name] = cli
		gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := cli.Get(gctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		gcancel()
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("reading the revision of the etcd of %s: %w", w.Name, err)
		}
		start := resp.Header.Revision
		a.synced[w.Name] = start
		// One watch over both prefixes' parent keeps the records of Jobs and pods in etcd's order. Sync's
		// progress requests reach it only when both use contexts with the same metadata.
		ch := cli.Watch(wctx, "/registry/", clientv3.WithPrefix(), clientv3.WithRev(start+1))
		a.wg.Add(1)
		go a.run(w.Name, ch)
	}
	return a, nil
}

func (a *Ledger) run(cluster string, ch clientv3.WatchChan) {
	defer a.wg.Done()
	for resp := range ch {
		if err := resp.Err(); err != nil {
			a.mu.Lock()
			a.errs = append(a.errs, fmt.Errorf("watching jobs in the etcd of %s: %w", cluster, err))
			a.mu.Unlock()
			return
		}
		now := time.Now()
		a.mu.Lock()
		for _, ev := range resp.Events {
			if cluster == a.hub {
				a.recordHub(ev, now)
				continue
			}
			if strings.HasPrefix(string(ev.Kv.Key), PodsPrefix) {
				a.recordPod(cluster, ev, now)
				continue
			}
			ns, name, ok := splitKey(string(ev.Kv.Key), JobsPrefix)
			if !ok {
				continue
			}
			r := JobRecord{Cluster: cluster, Namespace: ns, Name: name, Revision: ev.Kv.ModRevision, Seen: now}
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				a.records = append(a.records, r)
			case ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision == ev.Kv.ModRevision:
				// A write that created the key; updates of an existing Job are not recorded.
				r.Created = true
				a.records = append(a.records, r)
			}
		}
		if resp.Header.Revision > a.synced[cluster] {
			a.synced[cluster] = resp.Header.Revision
		}
		a.mu.Unlock()
	}
}

// recordPod records one event of a pod key. Called with a.mu held.
func (a *Ledger) recordPod(cluster string, ev *clientv3.Event, now time.Time) {
	ns, name, ok := splitKey(string(ev.Kv.Key), PodsPrefix)
	if !ok {
		return
	}
	id := cluster + "/" + ns + "/" + name
	r := PodRecord{Cluster: cluster, Namespace: ns, Name: name, Revision: ev.Kv.ModRevision, Seen: now}
	if ev.Type == clientv3.EventTypeDelete {
		prev := a.last[id]
		r.WorkloadUID, r.Epoch, r.PodSet, r.PodGroup = prev.WorkloadUID, prev.Epoch, prev.PodSet, prev.PodGroup
		r.NodeName, r.Phase, r.GPUs, r.Deleted = prev.NodeName, prev.Phase, prev.GPUs, true
		delete(a.last, id)
	} else {
		var pod corev1.Pod
		if _, _, err := decoder.Decode(ev.Kv.Value, nil, &pod); err != nil {
			a.errs = append(a.errs, fmt.Errorf("decoding pod %s on %s: %w", id, cluster, err))
			return
		}
		r.WorkloadUID, r.Epoch = pod.Labels[gantry.WorkloadUIDLabel], pod.Labels[gantry.DispatchEpochLabel]
		r.PodSet = pod.Labels[gantry.PodSetLabel]
		if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
			r.PodGroup = *g.PodGroupName
		}
		r.NodeName, r.Phase = pod.Spec.NodeName, pod.Status.Phase
		for _, c := range pod.Spec.Containers {
			r.GPUs += c.Resources.Requests.Name(gantry.GPUResource, resource.DecimalSI).Value()
		}
		a.last[id] = r
	}
	if r.WorkloadUID != "" {
		a.pods = append(a.pods, r)
	} else {
		a.others = append(a.others, r)
	}
}

// recordHub records one event of a hub Job or Workload key; deletions end a history and are left out.
// Called with a.mu held.
func (a *Ledger) recordHub(ev *clientv3.Event, now time.Time) {
	key := string(ev.Kv.Key)
	if ev.Type == clientv3.EventTypeDelete {
		return
	}
	var r HubRecord
	if ns, name, ok := splitKey(key, JobsPrefix); ok {
		var job batchv1.Job
		if _, _, err := decoder.Decode(ev.Kv.Value, nil, &job); err != nil {
			a.errs = append(a.errs, fmt.Errorf("decoding hub job %s: %w", key, err))
			return
		}
		r = HubRecord{Kind: "Job", Namespace: ns, Name: name, UID: string(job.UID)}
		for _, c := range job.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				r.Terminal = c.Type
			}
		}
	} else if ns, name, ok := splitKey(key, WorkloadsPrefix); ok {
		var wl gantry.Workload
		if _, _, err := decoder.Decode(ev.Kv.Value, nil, &wl); err != nil {
			a.errs = append(a.errs, fmt.Errorf("decoding hub workload %s: %w", key, err))
			return
		}
		r = HubRecord{Kind: "Workload", Namespace: ns, Name: name, UID: string(wl.UID), Epoch: wl.Status.DispatchEpoch, Winner: wl.Status.ClusterName,
			Queue: wl.Spec.QueueName, Runs: wl.Status.Runs, CheckpointInterval: wl.Spec.CheckpointInterval}
	} else {
		return
	}
	r.Revision, r.Seen = ev.Kv.ModRevision, now
	a.hubLog = append(a.hubLog, r)
}

// decoder reads the objects the API server stores in etcd: protobuf with its magic prefix for built-in
// kinds, JSON for Gantry's.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, gantry.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// splitKey parses prefix + "<namespace>/<name>".
func splitKey(key, prefix string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(key, prefix)
	if !found {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// Sync waits until every watch has delivered everything each etcd holds now, so that records reflect
// at least what the API servers showed before the call.
func (a *Ledger) Sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for name, cli := range a.clients {
		resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("reading the revision of the etcd of %s: %w", name, err)
		}
		for {
			if err := a.Err(); err != nil {
				return err
			}
			a.mu.Lock()
			done := a.synced[name] >= resp.Header.Revision
			a.mu.Unlock()
			if done {
				break
			}
			// A progress notification carries the store's revision even when no Job changed.
			if err := cli.RequestProgress(ctx); err != nil {
				return fmt.Errorf("requesting watch progress from the etcd of %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the job audit of %s did not reach revision %d: %w", name, resp.Header.Revision, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Records returns the records of Jobs in a namespace, in the order they were seen.
func (a *Ledger) Records(namespace string) []JobRecord {
	return inNamespace(a, func() []JobRecord { return a.records }, func(r JobRecord) string { return r.Namespace }, namespace)
}

// Pods returns the records of Gantry's pods in a namespace, in the order they were seen.
func (a *Ledger) Pods(namespace string) []PodRecord {
	return inNamespace(a, func() []PodRecord { return a.pods }, func(r PodRecord) string { return r.Namespace }, namespace)
}

// OtherPods returns the records of the pods in a namespace that are not Gantry's, in the order seen.
func (a *Ledger) OtherPods(namespace string) []PodRecord {
	return inNamespace(a, func() []PodRecord { return a.others }, func(r PodRecord) string { return r.Namespace }, namespace)
}

// inNamespace returns the records of a namespace; records is read with the ledger locked.
func inNamespace[R any](a *Ledger, records func() []R, namespaceOf func(R) string, namespace string) []R {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []R
	for _, r := range records() {
		if namespaceOf(r) == namespace {
			out = append(out, r)
		}
	}
	return out
}

// Hub returns the records of hub Jobs and Workloads in a namespace, in etcd's order.
func (a *Ledger) Hub(namespace string) []HubRecord {
	return inNamespace(a, func() []HubRecord { return a.hubLog }, func(r HubRecord) string { return r.Namespace }, namespace)
}

// CheckHubHistory checks the hub records of a ledger (in etcd's order) for two promises: a hub Job that
// reached Complete or Failed stays there (each job reaches exactly one terminal state), and a Workload
// has at most one winner in each dispatch epoch. It returns every breach it finds.
func CheckHubHistory(records []HubRecord) error {
	terminal := map[string]batchv1.JobConditionType{} // Job UID -> terminal state reached
	winner := map[string]string{}                     // Workload UID/epoch -> winner
	var errs []error
	for _, r := range records {
		switch r.Kind {
		case "Job":
			was, reached := terminal[r.UID]
			switch {
			case reached && r.Terminal != was:
				errs = append(errs, fmt.Errorf("hub job %s/%s was %s, then %q (revision %d)", r.Namespace, r.Name, was, r.Terminal, r.Revision))
			case !reached && r.Terminal != "":
				terminal[r.UID] = r.Terminal
			}
		case "Workload":
			key := fmt.Sprintf("%s/%d", r.UID, r.Epoch)
			if w, ok := winner[key]; ok && r.Winner != "" && r.Winner != w {
				errs = append(errs, fmt.Errorf("workload %s/%s has winners %s and %s in epoch %d (revision %d)", r.Namespace, r.Name, w, r.Winner, r.Epoch, r.Revision))
			}
			if r.Winner != "" {
				winner[key] = r.Winner
			}
		}
	}
	return errors.Join(errs...)
}

// Err reports why a watch stopped, if one did.
func (a *Ledger) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return errors.Join(a.errs...)
}

// Close stops the watches.
func (a *Ledger) Close() {
	a.cancel()
	for _, cli := range a.clients {
		_ = cli.Close()
	}
	a.wg.Wait()
}

// CheckOneRun checks the pod records of a ledger (in the order seen) for the promise that a job runs in
// one place: at no instant do pods of two (cluster, epoch) pairs of one Workload live at once, and pods
// of at most one pair run to completion. It returns every breach it finds.
func CheckOneRun(pods []PodRecord) error {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b PodRecord) int { return a.Seen.Compare(b.Seen) })
	type run struct{ cluster, epoch string }
	live := map[string]map[run]map[string]bool{} // workload -> run -> live pods
	completed := map[string]map[run]bool{}
	var errs []error
	for _, r := range sorted {
		at := run{r.Cluster, r.Epoch}
		runs := live[r.WorkloadUID]
		if runs == nil {
			runs = map[run]map[string]bool{}
			live[r.WorkloadUID] = runs
		}
		if runs[at] == nil {
			runs[at] = map[string]bool{}
		}
		if r.Live() {
			runs[at][r.Name] = true
		} else {
			delete(runs[at], r.Name)
		}
		if r.Live() {
			for other, pods := range runs {
				if other != at && len(pods) > 0 {
					errs = append(errs, fmt.Errorf("workload %s: pod %s live on %s in epoch %s while %d pod(s) live on %s in epoch %s (%s)",
						r.WorkloadUID, r.Name, r.Cluster, r.Epoch, len(pods), other.cluster, other.epoch, r.Seen.Format(time.RFC3339Nano)))
				}
			}
		}
		if r.Phase == corev1.PodSucceeded {
			if completed[r.WorkloadUID] == nil {
				completed[r.WorkloadUID] = map[run]bool{}
			}
			completed[r.WorkloadUID][at] = true
		}
	}
	for uid, runs := range completed {
		if len(runs) > 1 {
			errs = append(errs, fmt.Errorf("workload %s ran to completion in %d places: %v", uid, len(runs), runs))
		}
	}
	return errors.Join(errs...)
}

// GangBound follows the pods of one Workload on one cluster through the records (in the order seen) and
// says how many of them were bound at the last record and at most at once.
func GangBound(pods []PodRecord, cluster, workloadUID string) (last, most int) {
	bound := map[string]bool{}
	for _, r := range pods {
		if r.Cluster != cluster || r.WorkloadUID != workloadUID {
			continue
		}
		if r.NodeName != "" && !r.Deleted {
			bound[r.Name] = true
		} else {
			delete(bound, r.Name)
		}
		most = max(most, len(bound))
	}
	return len(bound), most
}

// CheckQuota checks the pod records of a ledger (in the order seen) against GPU quotas per cluster: at
// no instant do the live pods on a cluster request more GPUs than its quota. A cluster missing from
// quota has none. It returns the first breach on each cluster.
func CheckQuota(pods []PodRecord, quota map[string]int64) error {
	sorted := slices.Clone(pods)
	slices.SortStableFunc(sorted, func(a, b PodRecord) int { return a.Seen.Compare(b.Seen) })
	live := map[string]map[string]int64{} // cluster -> pod -> GPUs
	breached := map[string]bool{}
	var errs []error
	for _, r := range sorted {
		if live[r.Cluster] == nil {
			live[r.Cluster] = map[string]int64{}
		}
		if r.Live() {
			live[r.Cluster][r.Name] = r.GPUs
		} else {
			delete(live[r.Cluster], r.Name)
		}
		var used int64
		for _, g := range live[r.Cluster] {
			used += g
		}
		if used > quota[r.Cluster] && !breached[r.Cluster] {
			breached[r.Cluster] = true
			errs = append(errs, fmt.Errorf("%s: live pods use %d GPUs at %s, quota %d", r.Cluster, used,
				r.Seen.Format(time.RFC3339Nano), quota[r.Cluster]))
		}
	}
	return errors.Join(errs...)
}

// LedgerRun is a run of a hub Workload as the ledger last saw it.
type LedgerRun struct {
	WorkloadUID        string
	Queue              string
	CheckpointInterval *metav1.Duration
	gantry.Run
}

// Runs are the runs the hub's Workloads recorded over the ledger's whole history, each (Workload, epoch)
// once, as last written: a run recorded and later left out of a Workload's list of the last
// gantry.MaxRuns is still there.
func Runs(records []HubRecord) []LedgerRun {
	index := map[string]int{}
	var out []LedgerRun
	for _, r := range records {
		for _, run := range r.Runs {
			key := fmt.Sprintf("%s/%d", r.UID, run.Epoch)
			if i, ok := index[key]; ok {
				out[i].Run = run
				continue
			}
			index[key] = len(out)
			out = append(out, LedgerRun{WorkloadUID: r.UID, Queue: r.Queue, CheckpointInterval: r.CheckpointInterval, Run: run})
		}
	}
	return out
}
