// Package jobs turns batch Jobs submitted to the hub into Workloads.
package jobs

import (
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
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
// finalizer that keeps it until its objects on workers are withdrawn. The Job's placement annotations
// must be valid (PlacementOf).
func NewWorkload(job *batchv1.Job, priority int32) *gantry.Workload {
	tpl := &job.Spec.Template
	requests := resourcehelper.PodRequests(&corev1.Pod{Spec: tpl.Spec}, resourcehelper.PodResourcesOptions{})
	products, topologyKey, _ := PlacementOf(job)
	var affinity *corev1.NodeSelector
	if a := tpl.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
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
				Name:                 "main",
				Count:                PodCount(job),
				Requests:             requests,
				NodeSelector:         tpl.Spec.NodeSelector,
				Tolerations:          tpl.Spec.Tolerations,
				RequiredNodeAffinity: affinity,
				GPUProducts:          products,
			}},
			TopologyKey: topologyKey,
		},
	}
}

// PlacementOf reads the Job's placement annotations: the GPU products its pods accept, in order of
// preference (gantry.dev/gpu-products), and the node label key all its pods must share a value of
// (gantry.dev/topology-key). It says what is wrong with them, if anything.
func PlacementOf(job *batchv1.Job) (products []string, topologyKey string, err error) {
	if v, ok := job.Annotations[gantry.GPUProductsAnnotation]; ok {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				return nil, "", fmt.Errorf("annotation %s=%q names an empty product", gantry.GPUProductsAnnotation, v)
			case slices.Contains(products, p):
				return nil, "", fmt.Errorf("annotation %s=%q names %q twice", gantry.GPUProductsAnnotation, v, p)
			}
			if errs := validation.IsValidLabelValue(p); len(errs) > 0 {
				return nil, "", fmt.Errorf("annotation %s: %q is not a node label value: %s", gantry.GPUProductsAnnotation, p, strings.Join(errs, "; "))
			}
			products = append(products, p)
		}
		if len(products) > gantry.MaxGPUProducts {
			return nil, "", fmt.Errorf("annotation %s lists %d products; at most %d are allowed", gantry.GPUProductsAnnotation, len(products), gantry.MaxGPUProducts)
		}
	}
	if v, ok := job.Annotations[gantry.TopologyKeyAnnotation]; ok {
		if errs := validation.IsQualifiedName(v); len(errs) > 0 {
			return nil, "", fmt.Errorf("annotation %s: %q is not a node label key: %s", gantry.TopologyKeyAnnotation, v, strings.Join(errs, "; "))
		}
		topologyKey = v
	}
	return products, topologyKey, nil
}
