package jobs

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TemplatesKept is how many pod templates the hub keeps by default (Templates): those of the newest
// jobs, a few MiB.
const TemplatesKept = 1024

// Templates keeps the pod templates TrimJob drops from the hub's cache, of the newest jobs only. The
// two steps that read a job's pods, building its Workload and creating its Job on the winner, follow
// its creation within moments on a hub that keeps up; with the template kept they read nothing from
// the API server, where each would be a read of the whole Job from etcd on the path of every job.
// A job whose template is no longer kept (a deep queue) is read whole, as without Templates.
type Templates struct {
	mu   sync.Mutex
	kept map[types.UID]keptTemplate
	// ring holds the kept UIDs in the order they were first kept; next is the oldest, replaced first.
	ring []types.UID
	next int
}

type keptTemplate struct {
	version  string // the resourceVersion of the job the template was taken from
	template corev1.PodTemplateSpec
}

// NewTemplates keeps the templates of the n newest jobs.
func NewTemplates(n int) *Templates {
	return &Templates{kept: make(map[types.UID]keptTemplate, n), ring: make([]types.UID, 0, n)}
}

// Trim is the hub cache's transform of batch Jobs: TrimJob, keeping the template it drops.
func (t *Templates) Trim(obj any) (any, error) {
	if job, ok := obj.(*batchv1.Job); ok && t != nil && len(job.Spec.Template.Spec.Containers) > 0 {
		// The informer decoded the object for the cache alone, and the trim leaves the template
		// nothing else refers to: it is kept as it is, not copied.
		t.keep(job.UID, job.ResourceVersion, job.Spec.Template)
	}
	return TrimJob(obj)
}

func (t *Templates) keep(uid types.UID, version string, template corev1.PodTemplateSpec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.kept[uid]; !known {
		if len(t.ring) < cap(t.ring) {
			t.ring = append(t.ring, uid)
		} else if len(t.ring) > 0 {
			delete(t.kept, t.ring[t.next])
			t.ring[t.next] = uid
			t.next = (t.next + 1) % len(t.ring)
		} else {
			return // keeps none
		}
	}
	t.kept[uid] = keptTemplate{version: version, template: template}
}

// template is a copy of the template kept of exactly this version of the job.
func (t *Templates) template(job *batchv1.Job) (corev1.PodTemplateSpec, bool) {
	if t == nil {
		return corev1.PodTemplateSpec{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.kept[job.UID]
	if !ok || k.version != job.ResourceVersion {
		return corev1.PodTemplateSpec{}, false
	}
	return *k.template.DeepCopy(), true
}

// Whole returns the job with its pod template: the job itself when the cache left it whole; a copy of
// it with the template kept of the same version; else the job as the API server holds it, read
// through live. A nil Templates keeps none.
func (t *Templates) Whole(ctx context.Context, live client.Reader, job client.Object) (client.Object, error) {
	if !Trimmed(job) {
		return job, nil
	}
	if template, ok := t.template(job.(*batchv1.Job)); ok {
		whole := job.(*batchv1.Job).DeepCopy()
		whole.Spec.Template = template
		return whole, nil
	}
	whole := &batchv1.Job{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(job), whole); err != nil {
		return nil, fmt.Errorf("reading Job %s: %w", client.ObjectKeyFromObject(job), err)
	}
	return whole, nil
}
