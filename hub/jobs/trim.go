package jobs

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TrimJob drops what the hub's cache of batch Jobs does not keep: the managed fields, the pod
// template and the selector, about two thirds of what a queued Job's fields take in memory
// (docs/performance.md). The hub reads a Job's pods only to build its Workload and to create its Job
// on the winner, once each, and takes them then from the templates it kept of the newest jobs or from
// the API server (Templates.Whole); the selector, which the API server generated for the hub's pods
// that never exist, not at all (the Job on the winner gets its own). Every other reader uses what
// stays: metadata, the Job's other spec fields and its status. A status write of a trimmed Job is
// safe: the API server keeps the spec it has.
func TrimJob(obj any) (any, error) {
	if job, ok := obj.(*batchv1.Job); ok {
		job.ManagedFields = nil
		job.Spec.Template = corev1.PodTemplateSpec{}
		job.Spec.Selector = nil
	}
	return obj, nil
}

// Trimmed says whether the cache trimmed the job: a batch Job whose template has no containers, which
// the API server never accepts.
func Trimmed(job client.Object) bool {
	j, ok := job.(*batchv1.Job)
	return ok && len(j.Spec.Template.Spec.Containers) == 0
}
