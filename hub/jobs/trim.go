package jobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrimJob is the hub cache's transform of batch Jobs. Besides the managed fields, it drops the pod
// template, about two thirds of what a queued Job's fields take in memory (docs/performance.md): the hub reads a Job's pods only to build its
// Workload and to create its Job on the winner, once each, and reads the whole Job from the API server
// then (WholeJob). Every other reader uses what stays: metadata, the Job's own spec fields and its
// status. A status write of a trimmed Job is safe: the API server keeps the spec it has.
func TrimJob(obj any) (any, error) {
	if job, ok := obj.(*batchv1.Job); ok {
		job.ManagedFields = nil
		job.Spec.Template = corev1.PodTemplateSpec{}
	}
	return obj, nil
}

// Trimmed says whether the cache trimmed the job: a batch Job whose template has no containers, which
// the API server never accepts.
func Trimmed(job client.Object) bool {
	j, ok := job.(*batchv1.Job)
	return ok && len(j.Spec.Template.Spec.Containers) == 0
}

// WholeJob returns the job with its pod template: the job itself when the cache left it whole, else the
// job as the API server holds it.
func WholeJob(ctx context.Context, live client.Reader, job client.Object) (client.Object, error) {
	if !Trimmed(job) {
		return job, nil
	}
	whole := &batchv1.Job{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(job), whole); err != nil {
		return nil, fmt.Errorf("reading Job %s: %w", client.ObjectKeyFromObject(job), err)
	}
	return whole, nil
}
