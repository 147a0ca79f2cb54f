package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodSet is a group of identical pods of a job.
type PodSet struct {
	// Name of the pod set, unique in the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Count of pods that must run at once.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
	// Requests of one pod: the sum over its containers, or its largest init container, whichever is larger.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// NodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// WorkloadSpec is the job's demand, derived from it when it was submitted.
type WorkloadSpec struct {
	// QueueName is the namespaced Queue the workload was submitted to.
	// +kubebuilder:validation:MaxLength=253
	QueueName string `json:"queueName"`
	// Priority orders workloads in a queue: higher first, then older first.
	// +optional
	Priority int32 `json:"priority,omitempty"`
	// PodSets of the job; all pods of all sets run at once or not at all.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	PodSets []PodSet `json:"podSets"`
}

// RejectedCluster is a cluster that said it can never run the workload.
type RejectedCluster struct {
	Name    string `json:"name"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// WorkloadStatus is the dispatch state. On the hub the dispatcher writes it; on a worker copy the agent
// writes the Admitted condition.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.clusterName) || (has(self.clusterName) && self.clusterName == oldSelf.clusterName)",message="clusterName is immutable once set: a workload has exactly one winner"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.dispatchEpoch) || (has(self.dispatchEpoch) && self.dispatchEpoch >= oldSelf.dispatchEpoch)",message="dispatchEpoch never decreases"
type WorkloadStatus struct {
	// Conditions: Pending, Dispatched, Admitted, Finished.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DispatchEpoch counts dispatch attempts; every object created on a worker carries the epoch that
	// created it.
	// +optional
	DispatchEpoch int64 `json:"dispatchEpoch,omitempty"`

	// NominatedClusters received copies in the current epoch.
	// +listType=atomic
	// +optional
	NominatedClusters []string `json:"nominatedClusters,omitempty"`

	// ClusterName is the winner: the cluster that runs the job. Set once, never changed.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`

	// RejectedClusters can never run the workload; they are not nominated again.
	// +listType=map
	// +listMapKey=name
	// +optional
	RejectedClusters []RejectedCluster `json:"rejectedClusters,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=wl
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Finished",type=string,JSONPath=`.status.conditions[?(@.type=="Finished")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Pending")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Workload stands for one submitted job on the hub; copies of it on worker clusters ask their agents for
// admission.
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkloadSpec   `json:"spec"`
	Status WorkloadStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WorkloadList is a list of Workloads.
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

func init() {
	register(&Workload{}, &WorkloadList{})
}
