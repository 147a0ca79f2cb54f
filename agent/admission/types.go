// Package admission decides, on a worker cluster, whether a gang of pods fits now: every pod of every pod
// set placed at once on some Ready node, or none of them.
//
// It is a pure function over an in-memory Snapshot of the cluster: no client, no informer, no clock. The
// agent builds a Snapshot on every pass from its informers (NewSnapshot, then AddUsage for each
// non-terminal bound pod and Reserve for each gang admitted earlier whose pods are not running yet), asks
// Admit for a decision on each pending gang and writes the decisions back.
//
// Besides each pod's own constraints (nodeSelector, required affinity, tolerations), a pod set may list
// the GPU products it accepts in order of preference (all its pods then use one of them), and a gang may
// ask for a topology domain (all its pods on nodes sharing one value of a node label). Fit searches the
// products and domains in a fixed order and records the choice in each Assignment; when nothing fits, the
// Unfit explanation names what blocks and where it came closest.
//
// Fit places pods only on nodes that are Ready and schedulable, but its rejections (NeverFits,
// NoEligibleNode) are final: the hub gives up on the cluster for the gang. So a gang is rejected only if
// it would not fit either once every node is back: the nodes that are away (not Ready, cordoned, or
// carrying a taint Kubernetes sets and lifts by itself, such as node.kubernetes.io/not-ready or
// node.kubernetes.io/unschedulable) counted as Ready, schedulable and free of those taints, and every
// node empty. Empty, because NeverFits already means "not even on empty nodes": running pods end, while
// labels, other taints and allocatable stay. The whole gang must fit so, all or nothing, under the same
// rules as any fit. If it would, it waits with InsufficientResources, and the message names the away
// nodes it would use, so that a person can bring them back. Nodes that left the cluster are not counted:
// the snapshot does not know them. The check runs only for gangs about to be rejected while some node is
// away.
//
// Admit decides gangs in order: priority (higher first), then creation time (older first), then key.
// Each gang is fitted against what the gangs before it left, so admission is best effort: a small gang
// may pass a large one that does not fit yet, and a large gang could wait forever while small jobs keep
// taking the nodes it needs as they free up. AdmitWithOptions prevents that with a starvation timeout: a
// gang that does not fit may be passed only until it has waited that long (measured from its
// WaitingSince, else its CreationTime, to the time the caller passes in). From then on it is starving:
// until it fits, no gang after it in the order is admitted onto a node it could use, so those nodes
// drain as their pods finish, and once enough is free it is admitted before any gang behind it. Small
// gangs still pass it on nodes it cannot use (CPU-only nodes, other GPU products, pools with taints it
// does not tolerate), and gangs before it (higher priority, or older) are never held back. Gangs that can
// never fit (NeverFits, NoEligibleNode, InvalidGang) never starve anyone, nor do gangs that wait only for
// nodes to come back: holding the nodes that are here would not make them fit.
//
// A Snapshot is not safe for concurrent use; Fit reuses scratch buffers held by the Snapshot.
package admission

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GPUProductLabel is the node label naming the GPU product a node carries (set by NVIDIA's GPU feature
// discovery). Summary groups GPU capacity by its value.
const GPUProductLabel = "nvidia.com/gpu.product"

// GPUResource is the extended resource name of NVIDIA GPUs.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// MaxGPUProductCombinations caps the combinations of GPU products that Fit tries for one gang (a gang of
// pod sets listing 3 and 4 products has 12). Combinations past the cap are not tried; the Unfit message
// says so. It bounds the work of a fit, which tries every topology domain of each combination.
const MaxGPUProductCombinations = 64

// Node is the part of a corev1.Node that the fit needs. Allocatable is the node's status.allocatable; the
// Snapshot subtracts bound pods and reservations from it. A Snapshot keeps references to Labels, Taints
// and Allocatable: do not change them while the Snapshot is in use.
type Node struct {
	Name          string
	Labels        map[string]string
	Taints        []corev1.Taint
	Ready         bool
	Unschedulable bool
	Allocatable   corev1.ResourceList
}

// NodeFromCore takes from a corev1.Node what the fit needs. A node is Ready when its NodeReady condition
// is True.
func NodeFromCore(n *corev1.Node) Node {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
			break
		}
	}
	return Node{
		Name:          n.Name,
		Labels:        n.Labels,
		Taints:        n.Spec.Taints,
		Ready:         ready,
		Unschedulable: n.Spec.Unschedulable,
		Allocatable:   n.Status.Allocatable,
	}
}

// PodSet is Count identical pods, each requesting Requests. A pod may only go to a node whose labels match
// NodeSelector and RequiredAffinity (if set; the pod's
// affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) and whose NoSchedule and
// NoExecute taints Tolerations all tolerate. Every pod implicitly takes one of the node's "pods"
// allocatable; a "pods" entry in Requests is ignored.
//
// GPUProducts, when not empty, are the values of the node label nvidia.com/gpu.product (GPUProductLabel)
// the pod set accepts, most preferred first: all its pods go to nodes of one of these products, and a node
// without the label never matches. Entries must be non-empty and distinct. Empty means any node, as if
// the field were not there.
//
// NodeName, when set, is the one node every pod of the set goes to (the pod template's spec.nodeName).
// MaxPerNode, when positive, is the most pods of the set one node may take (host ports, an anti-affinity
// of the set's pods to one another by node, a spread over nodes).
type PodSet struct {
	Name             string
	Count            int32
	Requests         corev1.ResourceList
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	RequiredAffinity *corev1.NodeSelector
	NodeName         string
	MaxPerNode       int32
	GPUProducts      []string
}

// Gang is a job copy asking for admission: all pods of all its pod sets run at once or not at all. Key
// identifies it (for reservations and decisions), e.g. "namespace/name". Priority (higher first), then
// CreationTime (older first), then Key order gangs in Admit.
//
// TopologyKey, when set, is a node label (e.g. topology.kubernetes.io/zone) whose value names a topology
// domain: all pods of all pod sets then go to nodes of one domain, and nodes without the label (or with
// an empty value) are not eligible.
//
// WaitingSince is when the gang started waiting for admission, from which starvation protection
// (AdmitOptions.StarvationTimeout) measures its wait. Leave it zero to measure from CreationTime, which
// suits a gang that has been waiting since it was created (the copy's metadata.creationTimestamp). Set it
// when the gang waits anew after it was created: e.g. when it has just become able to fit at all, or it
// is queued again after being evicted. It does not change the order, which CreationTime sets. A gang
// with neither time never starves.
//
// Preempting says that room is being made for the gang by preemption (workloads whose going lets it
// fit are being removed): it holds the nodes it could use from the gangs after it as a starving gang
// does, at once and even with starvation protection off, so that what the preemption frees is not
// taken by smaller gangs first.
type Gang struct {
	Key          string
	Priority     int32
	CreationTime time.Time
	PodSets      []PodSet
	TopologyKey  string
	WaitingSince time.Time
	Preempting   bool
}

// Assignment puts Count pods of pod set PodSet on node Node. Requests is the per-pod request of the pod
// set (a copy), so that a Placement can be reserved on its own.
//
// GPUProduct is the product chosen for the pod set among its GPUProducts (the same in every assignment of
// the pod set), empty when the pod set lists none. Domain is the value of the gang's TopologyKey label
// shared by every node of the placement, empty when the gang has no TopologyKey. Reserve ignores both.
type Assignment struct {
	PodSet     string
	Node       string
	Count      int32
	Requests   corev1.ResourceList
	GPUProduct string
	Domain     string
}

// Placement is where every pod of a gang goes, ordered by pod set (in the gang's order), then node name.
type Placement []Assignment

// Pods counts the pods of pod set podSet in the placement.
func (p Placement) Pods(podSet string) int32 {
	var n int32
	for _, a := range p {
		if a.PodSet == podSet {
			n += a.Count
		}
	}
	return n
}

// UnfitReason says why a gang does not fit. NoEligibleNode, InsufficientResources and NeverFits equal
// the reasons of the same names that the agent writes on a copy's Admitted condition.
// HeldForStarvingGang is, like InsufficientResources, a reason to wait.
type UnfitReason string

const (
	// NoEligibleNode: no node is Ready, schedulable, matches the pod set's nodeSelector and required
	// affinity and has only taints the pod set tolerates; and the gang would not fit either with every
	// node back (see the package doc).
	NoEligibleNode UnfitReason = "NoEligibleNode"
	// InsufficientResources: the gang would fit if the eligible nodes were empty, but not now; or it
	// fits no Ready schedulable nodes, even empty, but would fit once nodes that are away are back (the
	// message names them).
	InsufficientResources UnfitReason = "InsufficientResources"
	// NeverFits: even with every eligible node empty the pod set cannot be placed: one pod needs more
	// than any eligible node's allocatable, or the eligible nodes together cannot hold Count pods. With
	// GPU products or a topology key, this holds for every product the pod set accepts and every domain.
	// And the gang would not fit either with every node back (see the package doc).
	NeverFits UnfitReason = "NeverFits"
	// InvalidGang: the gang itself is malformed (negative count or request, duplicate pod set names,
	// empty or repeated GPU products).
	InvalidGang UnfitReason = "InvalidGang"
	// HeldForStarvingGang: the gang fits now, but only on nodes held for a gang before it in the order
	// that has waited the starvation timeout or longer and does not fit yet (AdmitWithOptions). Treat
	// it like InsufficientResources: wait; the nodes are released when that gang fits. Admit, without
	// starvation protection, never returns it.
	HeldForStarvingGang UnfitReason = "HeldForStarvingGang"
)

// Unfit explains why a gang does not fit now.
type Unfit struct {
	Reason UnfitReason
	// PodSet is the pod set that could not be placed.
	PodSet string
	// Resource is the resource that blocks it, if one does.
	Resource corev1.ResourceName
	// Message is for a person, on one line of bounded length: it names the pod set, the resource that
	// blocks (with the GPU product, if the pod set lists products) and the most of it free on one
	// eligible node, and which node that is; with a topology key, which domain came closest. For
	// HeldForStarvingGang it names the starving gang waited behind, how long that one has waited and
	// the timeout, e.g. `waiting behind "ns/big", which has waited 12m0s for nodes this gang could use
	// (starvation protection after 10m0s)`; PodSet is then the gang's first pod set that would use a held
	// node, and Resource is empty.
	Message string
}

// String returns "Reason: Message".
func (u *Unfit) String() string {
	if u == nil {
		return "<fits>"
	}
	return fmt.Sprintf("%s: %s", u.Reason, u.Message)
}

// Decision is the outcome of Admit for one gang: Admitted with its Placement (now reserved in the
// Snapshot), or not admitted with the Unfit explanation.
type Decision struct {
	Key       string
	Admitted  bool
	Placement Placement
	Unfit     *Unfit
}
