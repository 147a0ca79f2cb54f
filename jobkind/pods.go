package jobkind

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SamplePods are one pod of each of the job's pod sets as its kind's controller makes them from their
// templates, for a worker's API server to judge with a dry run before the job is created there: what
// admits or refuses pods (LimitRange, PodSecurity, a ResourceQuota, a policy or webhook on pods) sees
// them as it will see the job's. Nil when the job's pods cannot be read from the object alone (a
// TrainJob's are in its training runtime).
func SamplePods(k Kind, job client.Object) []SamplePod {
	sets, err := k.PodSets(job)
	if err != nil {
		return nil
	}
	pods := make([]SamplePod, 0, len(sets))
	for _, ps := range sets {
		if ps.Template == nil {
			continue
		}
		tpl := ps.Template.DeepCopy()
		pods = append(pods, SamplePod{PodSet: ps.Name, Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: job.GetNamespace(), GenerateName: job.GetName() + "-" + ps.Name + "-",
				Labels: tpl.Labels, Annotations: tpl.Annotations},
			Spec: tpl.Spec,
		}})
	}
	return pods
}

// SamplePod is a pod of the named pod set.
type SamplePod struct {
	PodSet string
	Pod    *corev1.Pod
}
