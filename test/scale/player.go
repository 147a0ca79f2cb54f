package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// player plays the Job controller of every worker: a Job Gantry creates there is marked running at
// once and complete after runtime, so that no pods are needed; a held job (namespace heldNS) runs until
// release. It also records when each Job was first seen on which worker, the end of each job's dispatch.
type player struct {
	runtime  time.Duration
	released chan struct{}

	mu      sync.Mutex
	arrived map[string]arrival // by namespace/name
	twice   []string           // jobs seen on a second worker
	errs    []error
	writes  map[string]int // status writes the player sent, by worker
}

// arrival is a Job's first sight on a worker.
type arrival struct {
	cluster string
	at      time.Time
}

func newPlayer(runtime time.Duration) *player {
	return &player{runtime: runtime, arrived: map[string]arrival{}, writes: map[string]int{}, released: make(chan struct{})}
}

// play watches the worker's Gantry Jobs until ctx ends.
func (p *player) play(ctx context.Context, w *apiServer) error {
	owned, err := labels.NewRequirement(gantry.WorkloadUIDLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	ca, err := cache.New(w.cfg, cache.Options{Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{&batchv1.Job{}: {Label: labels.NewSelector().Add(*owned)}}})
	if err != nil {
		return err
	}
	inf, err := ca.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if job, ok := obj.(*batchv1.Job); ok {
			p.arrive(ctx, w, job)
		}
	}}); err != nil {
		return err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the player's cache of %s did not sync", w.name)
	}
	return nil
}

func (p *player) arrive(ctx context.Context, w *apiServer, job *batchv1.Job) {
	now := time.Now()
	key := job.Namespace + "/" + job.Name
	p.mu.Lock()
	if prev, seen := p.arrived[key]; seen && prev.cluster != w.name {
		p.twice = append(p.twice, fmt.Sprintf("%s on %s and %s", key, prev.cluster, w.name))
	} else if !seen {
		p.arrived[key] = arrival{cluster: w.name, at: now}
	}
	p.mu.Unlock()
	if job.Status.StartTime != nil {
		return // seen again after a restart of the cache
	}
	go p.run(ctx, w, job.DeepCopy())
}

// run marks the Job running, then complete once runtime has passed.
func (p *player) run(ctx context.Context, w *apiServer, job *batchv1.Job) {
	pods := ptr.Deref(job.Spec.Parallelism, 1)
	start := job.CreationTimestamp.Rfc3339Copy()
	job.Status = batchv1.JobStatus{StartTime: &start, Active: pods}
	p.patchStatus(ctx, w, job)
	if job.Namespace == heldNS {
		select {
		case <-ctx.Done():
			return
		case <-p.released:
		}
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(p.runtime):
	}
	end := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &start, CompletionTime: &end, Succeeded: pods, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonCompletionsReached, LastTransitionTime: end, LastProbeTime: end},
	}}
	p.patchStatus(ctx, w, job)
}

func (p *player) patchStatus(ctx context.Context, w *apiServer, job *batchv1.Job) {
	err := p.patch(ctx, w, job)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writes[w.name]++
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
		p.errs = append(p.errs, fmt.Errorf("status of Job %s/%s on %s: %w", job.Namespace, job.Name, w.name, err))
	}
}

// patch writes the Job's status by a merge patch that names active even when it is 0, which the
// status's own encoding leaves out.
func (p *player) patch(ctx context.Context, w *apiServer, job *batchv1.Job) error {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&job.Status)
	if err != nil {
		return err
	}
	status["active"] = job.Status.Active
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	obj := &batchv1.Job{}
	obj.Namespace, obj.Name = job.Namespace, job.Name
	return w.client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// arrivedAt returns when the Job of that key first reached a worker.
func (p *player) arrivedAt(key string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.arrived[key]
	return a.at, ok
}

// release lets held jobs complete.
func (p *player) release() { close(p.released) }

// arrivedIn counts the Jobs of the namespace that reached a worker.
func (p *player) arrivedIn(ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for key := range p.arrived {
		if strings.HasPrefix(key, ns+"/") {
			n++
		}
	}
	return n
}

// byWorker counts, by worker, the Jobs that reached it and the player's status writes there so far.
func (p *player) byWorker() (arrived, writes map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	arrived = map[string]int{}
	for _, a := range p.arrived {
		arrived[a.cluster]++
	}
	return arrived, maps.Clone(p.writes)
}

// check returns what went wrong: a job on two workers, a status write that failed.
func (p *player) check() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.twice) > 0 {
		return fmt.Errorf("%d jobs reached two workers: %v", len(p.twice), p.twice)
	}
	if len(p.errs) > 0 {
		return fmt.Errorf("%d status writes failed, first: %w", len(p.errs), p.errs[0])
	}
	return nil
}
