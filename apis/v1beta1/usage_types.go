package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UsageName is the name of the one Usage of a namespace.
const UsageName = "gpu-hours"

// UsageRetentionDays is how many days, today included, a Usage keeps by day.
const UsageRetentionDays = 90

// UsageStatus is what the jobs of a namespace used: their runs' GPU time once each run ended, in all and
// by day, by Queue, GlobalQueue, cluster and GPU product.
type UsageStatus struct {
	// Totals count every run that ended since the Usage was made.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	// +optional
	Totals []UsageEntry `json:"totals,omitempty"`
	// Days count the runs by the UTC day they ran in, a run over midnight split between its days; the
	// last UsageRetentionDays, oldest first.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=90
	// +optional
	Days []DayUsage `json:"days,omitempty"`
	// InFlight are the Workloads whose runs up to Epoch are counted here while the Workload does not
	// say so yet (status.accountedEpoch): they are not counted again.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4096
	// +optional
	InFlight []AccountedRuns `json:"inFlight,omitempty"`
}

// DayUsage is what the namespace used on one UTC day.
type DayUsage struct {
	// Day is the date, as 2026-12-07.
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	Day string `json:"day"`
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	// +optional
	Entries []UsageEntry `json:"entries,omitempty"`
}

// UsageEntry is the GPU time of the runs of one Queue, GlobalQueue, cluster and GPU product.
type UsageEntry struct {
	// +kubebuilder:validation:MaxLength=253
	Queue string `json:"queue"`
	// +kubebuilder:validation:MaxLength=253
	// +optional
	GlobalQueue string `json:"globalQueue,omitempty"`
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// +kubebuilder:validation:MaxLength=63
	// +optional
	GPUProduct string `json:"gpuProduct,omitempty"`
	// GPUSeconds is the GPU time of the runs: their GPUs times how long each ran.
	GPUSeconds int64 `json:"gpuSeconds"`
	// BorrowedGPUSeconds is the part of it that ran on quota the GlobalQueue's cohort lent.
	// +optional
	BorrowedGPUSeconds int64 `json:"borrowedGPUSeconds,omitempty"`
	// LostGPUSeconds is the part of it whose work was lost: runs taken back before they ended
	// (preempted, failed over, stopped, given up).
	// +optional
	LostGPUSeconds int64 `json:"lostGPUSeconds,omitempty"`
	// Cost and LostCost price GPUSeconds and LostGPUSeconds at the cluster's spec.price for the product
	// when each run ended; unset where none was set.
	// +optional
	Cost Amount `json:"cost,omitempty"`
	// +optional
	LostCost Amount `json:"lostCost,omitempty"`
}

// Add adds o's GPU-seconds and costs into e (its key stays e's). A cost unset on both stays unset.
func (e *UsageEntry) Add(o UsageEntry) {
	e.GPUSeconds += o.GPUSeconds
	e.BorrowedGPUSeconds += o.BorrowedGPUSeconds
	e.LostGPUSeconds += o.LostGPUSeconds
	if o.Cost != "" {
		e.Cost = AmountOfMicros(e.Cost.Micros() + o.Cost.Micros())
	}
	if o.LostCost != "" {
		e.LostCost = AmountOfMicros(e.LostCost.Micros() + o.LostCost.Micros())
	}
}

// AccountedRuns says the runs of a Workload up to Epoch are counted.
type AccountedRuns struct {
	WorkloadUID types.UID `json:"workloadUID"`
	Epoch       int64     `json:"epoch"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Usage is what the jobs of its namespace used of the fleet's GPUs, kept by the hub (one per namespace,
// named gpu-hours): kubectl gantry usage reads it, and the hub's metrics count from it.
type Usage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status UsageStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// UsageList is a list of Usages.
type UsageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Usage `json:"items"`
}

func init() {
	register(&Usage{}, &UsageList{})
}
