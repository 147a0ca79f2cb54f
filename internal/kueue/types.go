// Package kueue holds the part of Kueue's API (kueue.x-k8s.io/v1beta2, the version Kueue stores) that
// Gantry's agent reads on a worker that runs Kueue. Gantry only reads these objects, never writes them;
// each type keeps the fields the agent reads, and decoding drops the rest, so that the agent's cache of
// a busy worker's Kueue Workloads stays small. Gantry does not require Kueue's module: its Kubernetes
// libraries and its integrations' would have to agree with Gantry's.
// +kubebuilder:object:generate=true
// +groupName=kueue.x-k8s.io
package kueue

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the version of Kueue's API the agent reads.
var GroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

const (
	// JobUIDLabel on a Kueue Workload holds the UID of the job it stands for.
	JobUIDLabel = "kueue.x-k8s.io/job-uid"
	// WorkloadQuotaReserved is true once Kueue reserved quota for the Workload in its ClusterQueue;
	// false, with Kueue's reason, while the Workload waits.
	WorkloadQuotaReserved = "QuotaReserved"
	// WorkloadAdmitted is true once the Workload's quota is reserved and its admission checks passed:
	// Kueue then lets the job run.
	WorkloadAdmitted = "Admitted"
)

// Workload is Kueue's unit of admission: one per job in a LocalQueue.
// +kubebuilder:object:root=true
type Workload struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorkloadSpec   `json:"spec,omitempty"`
	Status            WorkloadStatus `json:"status,omitempty"`
}

// WorkloadSpec is the part of a Kueue Workload's spec the agent reads.
type WorkloadSpec struct {
	// QueueName is the LocalQueue the Workload waits in.
	QueueName string `json:"queueName,omitempty"`
}

// WorkloadStatus is the part of a Kueue Workload's status the agent reads.
type WorkloadStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Admission names the ClusterQueue that reserved the Workload's quota; nil until one did.
	Admission *Admission `json:"admission,omitempty"`
}

// Admission is where Kueue admitted a Workload.
type Admission struct {
	ClusterQueue string `json:"clusterQueue"`
}

// WorkloadList is a list of Kueue Workloads.
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}

// AddToScheme registers the types under Kueue's group and version.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Workload{}, &WorkloadList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
