package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CohortSpec places a cohort in the tree of cohorts and gives it quota of its own.
// +kubebuilder:validation:XValidation:rule="!has(self.clusters) || self.clusters.all(c, self.clusters.exists_one(d, d.name == c.name))",message="each cluster may be listed only once"
type CohortSpec struct {
	// Parent names the Cohort this one belongs to. A cohort lends its parent what its queues and
	// sub-cohorts leave unused (within each cluster's lendingLimit) and may borrow, through it, what
	// the rest of the parent's tree leaves unused. Empty: the cohort is a root. A cohort on a cycle of
	// parents is treated as a root, and its status says so.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Parent string `json:"parent,omitempty"`

	// Clusters holds, per worker cluster, quota of the cohort's own, which only its queues and
	// sub-cohorts borrow, and what it lends its parent.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Clusters []CohortClusterQuota `json:"clusters,omitempty"`

	// FairSharing weighs the cohort against its siblings under the same parent.
	// +kubebuilder:default={}
	// +optional
	FairSharing FairSharing `json:"fairSharing,omitempty"`
}

// CohortClusterQuota is what a cohort holds and lends on one worker cluster.
type CohortClusterQuota struct {
	// Name of the WorkerCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Quota the cohort holds itself on the cluster, per resource: lent only to its own queues and
	// sub-cohorts, as if a member that never runs anything had lent it.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, type(self[r]) == int ? int(self[r]) >= 0 : !self[r].startsWith('-'))",message="quota must not be negative"
	// +optional
	Quota corev1.ResourceList `json:"quota,omitempty"`

	// LendingLimit caps, per resource, how much of what the cohort's tree leaves unused on the cluster
	// it lends its parent; the rest stays with its own queues and sub-cohorts. A resource not listed
	// lends all of it. Without a parent it has no effect.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(r, type(self[r]) == int ? int(self[r]) >= 0 : !self[r].startsWith('-'))",message="lendingLimit must not be negative"
	// +optional
	LendingLimit corev1.ResourceList `json:"lendingLimit,omitempty"`
}

// FairSharing is the weight of a queue or cohort among its siblings.
type FairSharing struct {
	// Weight of its share of what its cohort lends: under contention, what siblings borrow converges
	// to the ratio of their weights (a queue of weight 2 gets twice what one of weight 1 gets). A weight
	// of 0 borrows only what no sibling of positive weight asks for.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	Weight *int32 `json:"weight,omitempty"`
}

// Condition types and reasons of a Cohort.
const (
	// CohortActive is True when the cohort takes part in the tree as its spec says.
	CohortActive = "Active"
	// ReasonParentCycle: following parents leads back to the cohort; it is treated as a root.
	ReasonParentCycle = "ParentCycle"
	// ReasonInTree: the cohort is in the tree as its spec says.
	ReasonInTree = "InTree"
)

// CohortUsage is what a cohort's tree lends and uses on one cluster.
type CohortUsage struct {
	Name string `json:"name"`
	// Lendable is what its queues, sub-cohorts and own quota lend within the cohort.
	// +optional
	Lendable corev1.ResourceList `json:"lendable,omitempty"`
	// Used is how much of it admitted workloads of its tree use.
	// +optional
	Used corev1.ResourceList `json:"used,omitempty"`
	// Borrowed is what its tree uses beyond what it lends, borrowed through its parent.
	// +optional
	Borrowed corev1.ResourceList `json:"borrowed,omitempty"`
}

// CohortStatus summarises a cohort.
type CohortStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Usage per cluster.
	// +listType=map
	// +listMapKey=name
	// +optional
	Usage []CohortUsage `json:"usage,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.fairSharing.weight`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="Active")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parent) || self.spec.parent != self.metadata.name",message="a cohort cannot be its own parent"

// Cohort groups GlobalQueues (spec.cohort) and other cohorts (spec.parent) that lend one another the
// quota they leave unused. A cohort named by a GlobalQueue needs no Cohort object: without one it is a
// root with no quota of its own.
type Cohort struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CohortSpec   `json:"spec,omitempty"`
	Status CohortStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CohortList is a list of Cohorts.
type CohortList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cohort `json:"items"`
}

func init() {
	register(&Cohort{}, &CohortList{})
}
