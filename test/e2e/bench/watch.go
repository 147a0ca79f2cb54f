package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// jobTimes holds when the watches first saw things happen to one Job, in this process's clock, so
// that times from different clusters compare without clock skew or second-granular timestamps.
type jobTimes struct {
	hubCreated    time.Time
	hubComplete   time.Time
	workerCreated time.Time
	// workerComplete is when its Job on a worker completed (read for the burst posted straight there).
	workerComplete time.Time
	worker         string
	// creations counts Job creations seen on workers; Gantry creates exactly one.
	creations  int
	workerGone time.Time

	// Stages on the way, from the Workloads: the hub Workload's creation, its first nomination, the
	// first copy admitted on a worker, and the winner recorded on the hub.
	workloadCreated time.Time
	nominated       time.Time
	copyAdmitted    time.Time
	winnerRecorded  time.Time
}

// recorder watches the benchmark's Jobs and Workloads on every cluster.
type recorder struct {
	namespaces map[string]bool
	mu         sync.Mutex
	jobs       map[string]*jobTimes // namespace/name of the Job
	errs       []error
}

func newRecorder(namespaces ...string) *recorder {
	r := &recorder{namespaces: map[string]bool{}, jobs: map[string]*jobTimes{}}
	for _, ns := range namespaces {
		r.namespaces[ns] = true
	}
	return r
}

// watch starts a watch on one cluster from the resource version of a fresh list, so that nothing
// created after it returns is missed, and hands every event to observe.
func (r *recorder) watch(ctx context.Context, cluster, what string, list func(context.Context) (string, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), observe func(time.Time, watch.Event)) error {
	rv, err := list(ctx)
	if err != nil {
		return fmt.Errorf("listing %s on %s: %w", what, cluster, err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: watchFn})
	if err != nil {
		return fmt.Errorf("watching %s on %s: %w", what, cluster, err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			now := time.Now()
			if ev.Type == watch.Error {
				r.mu.Lock()
				r.errs = append(r.errs, fmt.Errorf("watch of %s on %s: %v", what, cluster, ev.Object))
				r.mu.Unlock()
				continue
			}
			observe(now, ev)
		}
	}()
	return nil
}

// watchJobs watches the Jobs carrying the run's label on one cluster.
func (r *recorder) watchJobs(ctx context.Context, c *testbed.Cluster, selector string, hub bool) error {
	api := c.Clientset.BatchV1().Jobs(metav1.NamespaceAll)
	return r.watch(ctx, c.Name, "jobs",
		func(ctx context.Context) (string, error) {
			l, err := api.List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return api.Watch(ctx, opts)
		},
		func(now time.Time, ev watch.Event) { r.observeJob(now, c.Name, hub, ev) })
}

// watchWorkloads watches the Workloads (hub) or copies (workers) in the recorder's namespaces.
func (r *recorder) watchWorkloads(ctx context.Context, c *testbed.Cluster, hub bool) error {
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		return err
	}
	return r.watch(ctx, c.Name, "workloads",
		func(ctx context.Context) (string, error) {
			var l gantry.WorkloadList
			if err := wc.List(ctx, &l, client.Limit(1)); err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return wc.Watch(ctx, &gantry.WorkloadList{}, &client.ListOptions{Raw: &opts})
		},
		func(now time.Time, ev watch.Event) { r.observeWorkload(now, hub, ev) })
}

func (r *recorder) observeWorkload(now time.Time, hub bool, ev watch.Event) {
	wl, ok := ev.Object.(*gantry.Workload)
	if !ok || !r.namespaces[wl.Namespace] || ev.Type == watch.Deleted {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.times(wl.Namespace, jobkind.JobName(wl))
	switch {
	case hub:
		if t.workloadCreated.IsZero() {
			t.workloadCreated = now
		}
		if t.nominated.IsZero() && wl.Status.DispatchEpoch > 0 {
			t.nominated = now
		}
		if t.winnerRecorded.IsZero() && wl.Status.ClusterName != "" {
			t.winnerRecorded = now
		}
	case t.copyAdmitted.IsZero() && apimeta.IsStatusConditionTrue(wl.Status.Conditions, gantry.WorkloadAdmitted):
		t.copyAdmitted = now
	}
}

// times returns the record of a Job, creating it; r.mu must be held.
func (r *recorder) times(ns, name string) *jobTimes {
	key := ns + "/" + name
	t := r.jobs[key]
	if t == nil {
		t = &jobTimes{}
		r.jobs[key] = t
	}
	return t
}

func (r *recorder) observeJob(now time.Time, cluster string, hub bool, ev watch.Event) {
	job, ok := ev.Object.(*batchv1.Job)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.times(job.Namespace, job.Name)
	switch {
	case hub && ev.Type == watch.Added && t.hubCreated.IsZero():
		t.hubCreated = now
	case !hub && ev.Type == watch.Added:
		t.creations++
		if t.workerCreated.IsZero() {
			t.workerCreated, t.worker = now, cluster
		}
	case !hub && ev.Type == watch.Deleted:
		t.workerGone = now
	}
	switch {
	case ev.Type == watch.Deleted || !complete(job):
	case hub && t.hubComplete.IsZero():
		t.hubComplete = now
	case !hub && t.workerComplete.IsZero():
		t.workerComplete = now
	}
}

func complete(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// get returns a copy of what was seen of a Job.
func (r *recorder) get(ns, name string) jobTimes {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.jobs[ns+"/"+name]; t != nil {
		return *t
	}
	return jobTimes{}
}

func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) > 0 {
		return r.errs[0]
	}
	return nil
}

// waitAll polls until done holds for every named Job of the namespace, or fails after timeout with how
// many are still missing.
func (r *recorder) waitAll(ns string, names []string, what string, timeout time.Duration, done func(jobTimes) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		for _, n := range names {
			if !done(r.get(ns, n)) {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if err := r.err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d of %d jobs in %s are still not %s", timeout, missing, len(names), ns, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
