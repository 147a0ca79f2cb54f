package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkerClusterSetSpec says which clusters of the fleet's inventory become WorkerClusters, and how.
// +kubebuilder:validation:XValidation:rule="has(self.clusterProfileSelector) != has(self.placementRef)",message="set exactly one of clusterProfileSelector and placementRef"
type WorkerClusterSetSpec struct {
	// ClusterProfileSelector selects ClusterProfiles (multicluster.x-k8s.io/v1alpha1) in the hub's
	// namespace by their labels; {} selects all of them.
	// +optional
	ClusterProfileSelector *metav1.LabelSelector `json:"clusterProfileSelector,omitempty"`
	// PlacementRef names an Open Cluster Management Placement (cluster.open-cluster-management.io) in
	// the hub's namespace: the clusters its PlacementDecisions list are selected, each reached through
	// the ClusterProfile of its name in the hub's namespace.
	// +optional
	PlacementRef *PlacementReference `json:"placementRef,omitempty"`
	// Template is what every WorkerCluster made for a selected cluster gets.
	// +optional
	Template WorkerClusterTemplate `json:"template,omitempty"`
}

// PlacementReference names a Placement in the hub's namespace.
type PlacementReference struct {
	// Name of the Placement.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// WorkerClusterTemplate is the part of a WorkerCluster a set decides. Cordoning and fencing stay the
// operator's, on each WorkerCluster.
type WorkerClusterTemplate struct {
	// Labels put on each WorkerCluster, besides gantry.dev/worker-cluster-set.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Failover of each WorkerCluster.
	// +optional
	Failover Failover `json:"failover,omitempty"`
}

// MemberState is where a cluster of a set stands.
// +kubebuilder:validation:Enum=Joined;Leaving;Conflict
type MemberState string

// States of a set's clusters.
const (
	// MemberJoined: selected, and its WorkerCluster made.
	MemberJoined MemberState = "Joined"
	// MemberLeaving: no longer selected; its WorkerCluster is cordoned and goes once no job of Gantry's
	// runs or is nominated there.
	MemberLeaving MemberState = "Leaving"
	// MemberConflict: selected, but a WorkerCluster of its name that the set did not make exists; the
	// set leaves it alone.
	MemberConflict MemberState = "Conflict"
)

// WorkerClusterSetMember is one cluster of a set.
type WorkerClusterSetMember struct {
	// Name of the cluster, its ClusterProfile and its WorkerCluster.
	Name  string      `json:"name"`
	State MemberState `json:"state"`
	// Connected mirrors the WorkerCluster's Connected condition: True, False or Unknown.
	// +optional
	Connected metav1.ConditionStatus `json:"connected,omitempty"`
	// Message says more: why it is not connected, what a leaving cluster waits for, whose the
	// conflicting WorkerCluster is.
	// +optional
	Message string `json:"message,omitempty"`
}

// WorkerClusterSetStatus is what the set made of its selection.
type WorkerClusterSetStatus struct {
	// Conditions: Synced says whether the selection could be read.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Selected is how many clusters the selection lists.
	Selected int32 `json:"selected"`
	// Joined, Connected, Leaving and Conflicts count the members in each state (Connected: joined ones
	// whose WorkerCluster is Connected).
	Joined    int32 `json:"joined"`
	Connected int32 `json:"connected"`
	Leaving   int32 `json:"leaving"`
	Conflicts int32 `json:"conflicts"`
	// Clusters, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []WorkerClusterSetMember `json:"clusters,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wcs
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selected`
// +kubebuilder:printcolumn:name="Joined",type=integer,JSONPath=`.status.joined`
// +kubebuilder:printcolumn:name="Connected",type=integer,JSONPath=`.status.connected`
// +kubebuilder:printcolumn:name="Leaving",type=integer,JSONPath=`.status.leaving`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// WorkerClusterSet makes a WorkerCluster for each cluster the fleet's inventory selects: ClusterProfiles
// by label, or an Open Cluster Management Placement's decisions. It cordons a cluster that leaves the
// selection and removes its WorkerCluster once no job of Gantry's runs there, and never touches a
// WorkerCluster it did not make.
type WorkerClusterSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkerClusterSetSpec   `json:"spec"`
	Status WorkerClusterSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WorkerClusterSetList is a list of WorkerClusterSets.
type WorkerClusterSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerClusterSet `json:"items"`
}

func init() {
	register(&WorkerClusterSet{}, &WorkerClusterSetList{})
}
