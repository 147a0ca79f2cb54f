// Package jobs turns batch Jobs submitted to the hub into Workloads.
package jobs

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// WorkloadName is the name of the hub Workload that stands for a Job. Job names are at most 63
// characters (they become label values), so the result is always a valid name; the prefix leaves room
// for Workloads of other job kinds.
func WorkloadName(jobName string) string { return "job-" + jobName }

// JobName inverts WorkloadName.
func JobName(workloadName string) string { return strings.TrimPrefix(workloadName, "job-") }

// PodCount is how many pods of the Job run at once: its parallelism, or fewer when fewer completions
// are asked for.
func PodCount(job *batchv1.Job) int32 {
	n := ptr.Deref(job.Spec.Parallelism, 1)
	if job.Spec.Completions != nil && *job.Spec.Completions < n {
		n = *job.Spec.Completions
	}
	return n
}

// NewWorkload builds the hub Workload for a Job. The Workload is owned by the Job and carries the
// finalizer that keeps it until its objects on workers are withdrawn.
func NewWorkload(job *batchv1.Job, priority int32) *gantry.Workload {
	tpl := &job.Spec.Template
	requests := resourcehelper.PodRequests(&corev1.Pod{Spec: tpl.Spec}, resourcehelper.PodResourcesOptions{})
	return &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkloadName(job.Name),
			Namespace: job.Namespace,
			Labels: map[string]string{
				gantry.JobNameLabel: job.Name,
				gantry.QueueLabel:   job.Labels[gantry.QueueLabel],
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
			Finalizers:      []string{gantry.WorkloadFinalizer},
		},
		Spec: gantry.WorkloadSpec{
			QueueName: job.Labels[gantry.QueueLabel],
			Priority:  priority,
			PodSets: []gantry.PodSet{{
				Name:         "main",
				Count:        PodCount(job),
				Requests:     requests,
				NodeSelector: tpl.Spec.NodeSelector,
				Tolerations:  tpl.Spec.Tolerations,
			}},
		},
	}
}
