package v1beta1

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkerClusterSpec says how the hub reaches a worker cluster and whether it may receive new jobs.
// +kubebuilder:validation:XValidation:rule="has(self.kubeconfigSecretRef) != has(self.clusterProfileRef)",message="set exactly one of kubeconfigSecretRef and clusterProfileRef"
type WorkerClusterSpec struct {
	// KubeconfigSecretRef names a Secret in the hub's namespace whose data key "kubeconfig" holds a
	// kubeconfig for the worker. The kubeconfig must authenticate with embedded credentials: kubeconfigs
	// that read local files or run exec plugins are refused unless the hub was started to allow them.
	// +optional
	KubeconfigSecretRef *SecretReference `json:"kubeconfigSecretRef,omitempty"`

	// ClusterProfileRef names a ClusterProfile (multicluster.x-k8s.io/v1alpha1) in the hub's namespace,
	// as a cluster inventory such as Open Cluster Management publishes it. The hub reaches the cluster
	// through the first of the profile's access providers that the hub's provider file
	// (--clusterprofile-provider-file) names, with that file's credential plugin: the profile supplies
	// the server and its CA, never the program that is run.
	// +optional
	ClusterProfileRef *ClusterProfileReference `json:"clusterProfileRef,omitempty"`

	// Cordoned stops new dispatches to the cluster; jobs already running there go on.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`

	// Failover says what the hub does with the jobs of this cluster while it cannot reach it.
	// +optional
	Failover Failover `json:"failover,omitempty"`

	// Fenced is the operator's word that nothing of this cluster runs any more (it is gone, or was
	// wiped). The hub then dispatches the jobs it ran elsewhere at once, each recorded as an eviction
	// with reason WorkerLost, lets go of Workloads being deleted that waited for it, and sends it
	// nothing new. Set it only when that is true: a job still running there would run twice. When the
	// cluster is back and fenced is cleared, what is left there of those jobs is deleted.
	// +optional
	Fenced bool `json:"fenced,omitempty"`

	// Kueue says that the worker runs Kueue and which of its LocalQueues Gantry's jobs go through there.
	// The agent then admits a job only when the ClusterQueue behind that LocalQueue has room for it by
	// Kueue's accounting, the job is created in that LocalQueue, and it counts as started only once Kueue
	// admitted it; one Kueue keeps waiting past the agent's placement timeout is dispatched elsewhere.
	// Gantry never changes Kueue's objects.
	// +optional
	Kueue *WorkerKueue `json:"kueue,omitempty"`

	// Price is what running on the cluster costs per hour, in one currency across the fleet. The Price
	// score of a GlobalQueue ranks clusters by it.
	// +optional
	Price *ClusterPrice `json:"price,omitempty"`
}

// ClusterPrice is what an hour of a cluster's GPUs and CPUs costs.
// +kubebuilder:validation:XValidation:rule="!has(self.gpu) || self.gpu.all(p, self.gpu.exists_one(q, has(q.product) == has(p.product) && (!has(p.product) || q.product == p.product)))",message="each GPU product may be priced only once"
type ClusterPrice struct {
	// GPU prices one GPU for an hour, by product (the node label nvidia.com/gpu.product); the entry
	// without a product prices every product not listed.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	GPU []GPUPrice `json:"gpu,omitempty"`
	// CPU prices one CPU core for an hour.
	// +optional
	CPU *Amount `json:"cpu,omitempty"`
}

// Amount is an amount of money: a decimal number, not negative, of at most six decimals, such as
// "2.10" (quoted in YAML).
// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,11})(\.[0-9]{1,6})?$`
// +kubebuilder:validation:MaxLength=19
type Amount string

// Value is the amount as a number; 0 for one the API would not accept.
func (a Amount) Value() float64 {
	v, err := strconv.ParseFloat(string(a), 64)
	if err != nil {
		return 0
	}
	return v
}

// Micros is the amount in millionths, exactly; 0 for one the API would not accept.
func (a Amount) Micros() int64 {
	whole, frac, _ := strings.Cut(string(a), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || len(frac) > 6 {
		return 0
	}
	f, err := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err != nil {
		return 0
	}
	return w*1_000_000 + f
}

// AmountOfMicros writes millionths as an Amount, without trailing zeros.
func AmountOfMicros(m int64) Amount {
	s := strconv.FormatInt(m/1_000_000, 10)
	if frac := strings.TrimRight(fmt.Sprintf("%06d", m%1_000_000), "0"); frac != "" {
		s += "." + frac
	}
	return Amount(s)
}

// GPUPrice is the price of an hour of one GPU of a product.
type GPUPrice struct {
	// Product is the GPU product (a value of the node label nvidia.com/gpu.product); empty for every
	// product not priced on its own.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Product string `json:"product,omitempty"`
	// PerHour is the price of one GPU of the product for one hour, such as "2.10".
	PerHour Amount `json:"perHour"`
}

// WorkerKueue names the LocalQueues of a worker's Kueue that Gantry's jobs go through.
type WorkerKueue struct {
	// LocalQueue is the LocalQueue, in the job's namespace on the worker, of the jobs of every namespace
	// that Namespaces does not name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	LocalQueue string `json:"localQueue"`
	// Namespaces name another LocalQueue for the jobs of some namespaces.
	// +listType=map
	// +listMapKey=namespace
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Namespaces []NamespaceLocalQueue `json:"namespaces,omitempty"`
}

// NamespaceLocalQueue is the LocalQueue of one namespace's jobs.
type NamespaceLocalQueue struct {
	// Namespace of the jobs.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// LocalQueue is the LocalQueue in that namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	LocalQueue string `json:"localQueue"`
}

// LocalQueueFor is the LocalQueue of a namespace's jobs on the worker, or "" when the worker does not
// run Kueue for Gantry.
func (k *WorkerKueue) LocalQueueFor(namespace string) string {
	if k == nil {
		return ""
	}
	for _, n := range k.Namespaces {
		if n.Namespace == namespace {
			return n.LocalQueue
		}
	}
	return k.LocalQueue
}

// FailoverPolicy is what the hub does with a lost cluster's jobs.
// +kubebuilder:validation:Enum=Wait;Fence
type FailoverPolicy string

const (
	// FailoverWait never dispatches a lost cluster's jobs elsewhere: they may still run there. Their
	// quota stays held until the cluster is back, or the operator fences it.
	FailoverWait FailoverPolicy = "Wait"
	// FailoverFence has the cluster's agent stop the hub's jobs there once the hub has not renewed its
	// lease on the cluster for the timeout; the hub, once it has not reached the cluster for the timeout
	// plus a margin, dispatches them elsewhere.
	FailoverFence FailoverPolicy = "Fence"
)

// DefaultFailoverTimeout is the failover timeout when the spec gives none.
const DefaultFailoverTimeout = 5 * time.Minute

// Failover is the policy for a cluster the hub loses.
type Failover struct {
	// Policy: Wait (default) or Fence.
	// +kubebuilder:default=Wait
	// +optional
	Policy FailoverPolicy `json:"policy,omitempty"`
	// Timeout, under Fence, is how long the hub's lease may go unrenewed before the agent stops the hub's
	// jobs; the hub dispatches them elsewhere after the timeout plus a margin. At least 30s; default 5m.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="failover timeout must be at least 30s"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// TimeoutOrDefault is the failover timeout in force.
func (f Failover) TimeoutOrDefault() time.Duration {
	if f.Timeout == nil || f.Timeout.Duration <= 0 {
		return DefaultFailoverTimeout
	}
	return f.Timeout.Duration
}

// SecretReference names a Secret in the hub's namespace.
type SecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretName is the name of the kubeconfig Secret, or "" for a cluster registered otherwise.
func (s WorkerClusterSpec) SecretName() string {
	if s.KubeconfigSecretRef == nil {
		return ""
	}
	return s.KubeconfigSecretRef.Name
}

// ClusterProfileReference names a ClusterProfile in the hub's namespace.
type ClusterProfileReference struct {
	// Name of the ClusterProfile.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// WorkerClusterStatus is what the hub observed of the cluster.
type WorkerClusterStatus struct {
	// Conditions: Connected, AgentReady, LeastPrivilege, AgentVersionSupported, and what its agent reports
	// (GangScheduling, Kueue).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Capacity is the latest summary the cluster's agent published.
	// +optional
	Capacity *CapacitySummary `json:"capacity,omitempty"`

	// AgentVersion is the version of the cluster's agent, as its capacity report says; empty when no
	// agent reports one.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=wc
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].status`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.conditions[?(@.type=="AgentReady")].status`
// +kubebuilder:printcolumn:name="Cordoned",type=boolean,JSONPath=`.spec.cordoned`
// +kubebuilder:printcolumn:name="Fenced",type=boolean,JSONPath=`.spec.fenced`
// +kubebuilder:printcolumn:name="Gangs",type=string,JSONPath=`.status.conditions[?(@.type=="GangScheduling")].status`,priority=1
// +kubebuilder:printcolumn:name="Kueue",type=string,JSONPath=`.spec.kueue.localQueue`,priority=1
// +kubebuilder:printcolumn:name="Failover",type=string,JSONPath=`.spec.failover.policy`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].reason`,priority=1
// +kubebuilder:printcolumn:name="Agent Version",type=string,JSONPath=`.status.agentVersion`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// WorkerCluster registers a cluster that runs Gantry jobs.
type WorkerCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WorkerClusterSpec   `json:"spec"`
	Status WorkerClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// WorkerClusterList is a list of WorkerClusters.
type WorkerClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkerCluster `json:"items"`
}

func init() {
	register(&WorkerCluster{}, &WorkerClusterList{})
}
