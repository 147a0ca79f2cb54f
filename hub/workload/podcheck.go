package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/workersync"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/jobkind"
)

// PodCheckTTL is how long pods that a worker's API server admitted in a dry run are taken as admitted
// there, for the jobs of the namespace whose pods are alike: a burst costs the worker one dry run, not
// one per job. A LimitRange or policy that appears meanwhile is not seen until then, and such a job
// ends as before: its agent gives it up when its pods are not placed (PlacementTimeout).
const PodCheckTTL = 30 * time.Second

// podsRefused asks the winner's API server, by a dry run of one pod of each pod set, whether it would
// admit the pods the job's controller will make there, before the job is created: a LimitRange,
// PodSecurity, a ResourceQuota or a policy on pods refuses pods, not the job, and the job would sit
// there with none. It returns the worker's refusal and whether it is final; "" when the pods pass or
// cannot be judged (the hub may not create pods there, a template its kind's controller completes).
func (r *Reconciler) podsRefused(ctx context.Context, w remote.Worker, wl *gantry.Workload, a workersync.WorkerAction) (string, bool) {
	samples := jobkind.SamplePods(jobkind.Of(wl), a.Object)
	if len(samples) == 0 {
		return "", false
	}
	key, err := podCheckKey(a.Cluster, samples)
	if err != nil || r.podChecks.passed(key, r.Clock.Now()) {
		return "", false
	}
	for _, s := range samples {
		err := createInNamespace(ctx, w, a.Cluster, s.Pod, client.DryRunAll)
		if msg, final, refused := podRefusal(err); refused {
			return fmt.Sprintf("pods of pod set %s are refused there: %s", s.PodSet, msg), final
		}
		if apierrors.IsForbidden(err) {
			// The hub may not create pods there (a worker set up before the rule): not asked again for
			// a while, which would cost a request per job for nothing.
			r.podChecks.pass(key, r.Clock.Now())
			return "", false
		}
		if err != nil {
			return "", false // not judged: the job's create meets what the dry run met
		}
	}
	r.podChecks.pass(key, r.Clock.Now())
	return "", false
}

// podRefusal reads a dry run's answer: refused when the worker's admission refused the pod; final
// unless it may pass (a ResourceQuota's room, a namespace being deleted). The hub's own lack of the
// right to create pods there, and a pod the API server finds invalid as such (its template, which the
// job's controller completes), are not refusals: they are not judged.
func podRefusal(err error) (message string, final, refused bool) {
	if err == nil {
		return "", false, false
	}
	msg := apiMessage(err)
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(msg, "cannot create resource"):
		return "", false, false
	case apierrors.IsForbidden(err) && (strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "is being terminated")):
		return msg, false, true
	case apierrors.IsForbidden(err):
		return msg, true, true
	case (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) && deniedByPolicy(msg):
		return msg, true, true
	}
	return "", false, false
}

// podCheckKey names the pods of a job for the cluster and namespace: alike pods share it. The labels
// that name the one job (Gantry's, those the Job API gives a Job's pods) are left out.
func podCheckKey(cluster string, samples []jobkind.SamplePod) (string, error) {
	h := fnv.New64a()
	for _, s := range samples {
		meta := s.Pod.ObjectMeta
		labels := maps.Clone(meta.Labels)
		maps.DeleteFunc(labels, func(k, _ string) bool { return oneJobsLabel(k) })
		b, err := json.Marshal([]any{s.PodSet, labels, meta.Annotations, s.Pod.Spec})
		if err != nil {
			return "", err
		}
		_, _ = h.Write(b)
	}
	return cluster + "/" + samples[0].Pod.Namespace + "/" + strconv.FormatUint(h.Sum64(), 36), nil
}

func oneJobsLabel(key string) bool {
	return strings.HasPrefix(key, gantry.GroupVersion.Group+"/") || slices.Contains(jobPodLabels, key)
}

var jobPodLabels = []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"}

// podChecks are the pods that passed a dry run, or that the hub may not dry-run, by podCheckKey, with
// when.
type podChecks struct {
	mu     sync.Mutex
	passes map[string]time.Time
}

func (p *podChecks) passed(key string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.passes[key]
	return ok && now.Sub(at) < PodCheckTTL
}

func (p *podChecks) pass(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.passes == nil {
		p.passes = map[string]time.Time{}
	}
	if len(p.passes) >= 1024 { // what is stale goes before the map grows further
		for k, at := range p.passes {
			if now.Sub(at) >= PodCheckTTL {
				delete(p.passes, k)
			}
		}
	}
	p.passes[key] = now
}
