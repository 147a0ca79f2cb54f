// Package kueue holds the part of Kueue's API (kueue.x-k8s.io/v1beta2, the version Kueue stores) that
// Gantry's agent reads on a worker that runs Kueue. Gantry only reads these objects, never writes them;
// each type keeps the fields the agent reads, and decoding drops the rest, so that the agent's cache of
// a busy worker's Kueue Workloads stays small. Gantry does not require Kueue's module: its Kubernetes
// libraries and its integrations' would have to agree with Gantry's.
// +kubebuilder:object:generate=true
// +groupName=kueue.x-k8s.io
package kueue

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// ClusterQueueActive is true while a ClusterQueue can admit: its flavors and checks exist.
	ClusterQueueActive = "Active"
	// StopPolicyNone is the stop policy of a queue that admits.
	StopPolicyNone = "None"
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

// LocalQueue is a namespace's queue into a ClusterQueue.
// +kubebuilder:object:root=true
type LocalQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              LocalQueueSpec `json:"spec,omitempty"`
}

// LocalQueueSpec is the part of a LocalQueue's spec the agent reads.
type LocalQueueSpec struct {
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// StopPolicy other than None holds the queue's workloads.
	StopPolicy *string `json:"stopPolicy,omitempty"`
}

// LocalQueueList is a list of LocalQueues.
// +kubebuilder:object:root=true
type LocalQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LocalQueue `json:"items"`
}

// ClusterQueue holds quota per flavor and resource, and may borrow from its cohort.
// +kubebuilder:object:root=true
type ClusterQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterQueueSpec   `json:"spec,omitempty"`
	Status            ClusterQueueStatus `json:"status,omitempty"`
}

// ClusterQueueSpec is the part of a ClusterQueue's spec the agent reads.
type ClusterQueueSpec struct {
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`
	CohortName     string          `json:"cohortName,omitempty"`
	StopPolicy     *string         `json:"stopPolicy,omitempty"`
}

// ResourceGroup is a set of resources whose quota is given per flavor, flavors in the order Kueue
// tries them.
type ResourceGroup struct {
	CoveredResources []corev1.ResourceName `json:"coveredResources,omitempty"`
	Flavors          []FlavorQuotas        `json:"flavors,omitempty"`
}

// FlavorQuotas is the quota of one flavor for the resources of its group.
type FlavorQuotas struct {
	Name      string          `json:"name"`
	Resources []ResourceQuota `json:"resources,omitempty"`
}

// ResourceQuota is a nominal quota with what may be borrowed beyond it and lent of it.
type ResourceQuota struct {
	Name           corev1.ResourceName `json:"name"`
	NominalQuota   resource.Quantity   `json:"nominalQuota,omitempty"`
	BorrowingLimit *resource.Quantity  `json:"borrowingLimit,omitempty"`
	LendingLimit   *resource.Quantity  `json:"lendingLimit,omitempty"`
}

// ClusterQueueStatus is the part of a ClusterQueue's status the agent reads.
type ClusterQueueStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// FlavorsReservation is the quota held by the Workloads Kueue reserved quota for.
	FlavorsReservation []FlavorUsage `json:"flavorsReservation,omitempty"`
}

// FlavorUsage is what is held of one flavor.
type FlavorUsage struct {
	Name      string          `json:"name"`
	Resources []ResourceUsage `json:"resources,omitempty"`
}

// ResourceUsage is what is held of one resource of a flavor.
type ResourceUsage struct {
	Name  corev1.ResourceName `json:"name"`
	Total resource.Quantity   `json:"total,omitempty"`
}

// ClusterQueueList is a list of ClusterQueues.
// +kubebuilder:object:root=true
type ClusterQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterQueue `json:"items"`
}

// Cohort groups ClusterQueues and Cohorts that lend each other unused quota, with quota of its own.
// +kubebuilder:object:root=true
type Cohort struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CohortSpec `json:"spec,omitempty"`
}

// CohortSpec is the part of a Cohort's spec the agent reads.
type CohortSpec struct {
	ParentName     string          `json:"parentName,omitempty"`
	ResourceGroups []ResourceGroup `json:"resourceGroups,omitempty"`
}

// CohortList is a list of Cohorts.
// +kubebuilder:object:root=true
type CohortList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cohort `json:"items"`
}

// ResourceFlavor says which nodes a flavor's quota stands for.
// +kubebuilder:object:root=true
type ResourceFlavor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ResourceFlavorSpec `json:"spec,omitempty"`
}

// ResourceFlavorSpec is the part of a ResourceFlavor's spec the agent reads.
type ResourceFlavorSpec struct {
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
}

// ResourceFlavorList is a list of ResourceFlavors.
// +kubebuilder:object:root=true
type ResourceFlavorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceFlavor `json:"items"`
}

// AddToScheme registers the types under Kueue's group and version.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Workload{}, &WorkloadList{}, &LocalQueue{}, &LocalQueueList{}, &ClusterQueue{},
		&ClusterQueueList{}, &Cohort{}, &CohortList{}, &ResourceFlavor{}, &ResourceFlavorList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
