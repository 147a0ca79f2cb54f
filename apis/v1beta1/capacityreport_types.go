package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacitySummary describes what a worker cluster can hold, as its agent computed it.
type CapacitySummary struct {
	// Nodes counts all nodes; ReadyNodes those Ready and schedulable.
	Nodes      int32 `json:"nodes"`
	ReadyNodes int32 `json:"readyNodes"`

	// Resources per resource name, over Ready schedulable nodes.
	// +listType=map
	// +listMapKey=name
	// +optional
	Resources []ResourceCapacity `json:"resources,omitempty"`

	// GPUProducts per value of the node label nvidia.com/gpu.product.
	// +listType=map
	// +listMapKey=product
	// +optional
	GPUProducts []GPUProductCapacity `json:"gpuProducts,omitempty"`
}

// ResourceCapacity is the allocatable and free amount of one resource.
type ResourceCapacity struct {
	Name corev1.ResourceName `json:"name"`
	// Allocatable over Ready schedulable nodes.
	Allocatable resource.Quantity `json:"allocatable"`
	// Free is Allocatable minus bound pods and admission reservations.
	Free resource.Quantity `json:"free"`
	// LargestFreeOnNode is the most of the resource free on any single node.
	LargestFreeOnNode resource.Quantity `json:"largestFreeOnNode"`
	// Admitted is what the copies the agent holds admitted ask for of the resource, by their requests
	// (those whose job has not finished). The hub counts what the workloads it recorded won here ask for
	// beyond it as taken since the report, which Free does not show yet.
	// +optional
	Admitted *resource.Quantity `json:"admitted,omitempty"`
}

// GPUProductCapacity counts the GPUs of one product.
type GPUProductCapacity struct {
	Product           string `json:"product"`
	Nodes             int32  `json:"nodes"`
	Allocatable       int64  `json:"allocatable"`
	Free              int64  `json:"free"`
	LargestFreeOnNode int64  `json:"largestFreeOnNode"`
	// LargestAllocatableOnNode is the most GPUs of the product one node has at all.
	// +optional
	LargestAllocatableOnNode int64 `json:"largestAllocatableOnNode,omitempty"`
	// Shapes counts how many pods of common GPU sizes (1, 2, 4, 8 GPUs a pod) fit now on the product's
	// nodes, by free GPUs (and free pod slots) only.
	// +listType=map
	// +listMapKey=gpus
	// +optional
	Shapes []GPUShapeCount `json:"shapes,omitempty"`
}

// GPUShapeCount is how many pods of one GPU size fit now.
type GPUShapeCount struct {
	// GPUs a pod requests.
	GPUs int64 `json:"gpus"`
	// Pods of that size that fit at once.
	Pods int32 `json:"pods"`
}

// CapacityReportStatus is the agent's latest summary.
type CapacityReportStatus struct {
	// ClusterName is the name the agent was started with.
	ClusterName string `json:"clusterName,omitempty"`
	// AgentVersion is the version of the agent that writes the report (gantry-agent --version); empty
	// from agents older than v0.3.0.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// HeartbeatTime is when the agent last confirmed the report; a stale heartbeat means no agent.
	// +optional
	HeartbeatTime metav1.Time `json:"heartbeatTime,omitempty"`
	// Capacity is the summary itself.
	// +optional
	Capacity CapacitySummary `json:"capacity,omitempty"`
	// Conditions say what the cluster offers Gantry's jobs beyond capacity: GangScheduling.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Ready Nodes",type=integer,JSONPath=`.status.capacity.readyNodes`
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.heartbeatTime`
// +kubebuilder:printcolumn:name="Agent Version",type=string,JSONPath=`.status.agentVersion`,priority=1

// CapacityReport lives in a worker cluster: the agent publishes what the cluster can hold and the hub reads
// it through its connection, so workers need no credentials for the hub.
type CapacityReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status CapacityReportStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// CapacityReportList is a list of CapacityReports.
type CapacityReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityReport `json:"items"`
}

func init() {
	register(&CapacityReport{}, &CapacityReportList{})
}
