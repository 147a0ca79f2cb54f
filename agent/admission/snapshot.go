package admission

import (
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podsIndex is the index of the "pods" resource in every resource vector: each pod takes one.
const podsIndex = 0

// unlimited stands for the "pods" allocatable of a node that does not declare one. It is far from
// overflowing when pods are subtracted from it.
const unlimited int64 = math.MaxInt64 / 4

// Snapshot is the cluster as the fit sees it: nodes, what bound pods use and what admitted gangs hold.
//
// Resources are kept as fixed-width vectors of int64, one slot per resource name known to the snapshot
// (cpu in millicores, every other resource in its plain unit: bytes, devices, pods), so that the fit
// loop neither allocates nor hashes. A resource absent from a node's allocatable is 0 there.
//
// Nodes do not change after NewSnapshot, so the eligible nodes of each distinct set of placement
// constraints (nodeSelector, tolerations, required affinity), and their split by GPU product and by
// topology domain, are computed once and kept: build a new Snapshot for each admission pass.
type Snapshot struct {
	nodes    []nodeInfo // sorted by name, so index order is name order
	byName   map[string]int32
	resNames []corev1.ResourceName // slot -> name; slot 0 is "pods"
	resIndex map[corev1.ResourceName]int
	width    int     // number of slots
	alloc    []int64 // node*width+slot
	free     []int64 // alloc minus usage minus reservations; negative if overcommitted
	totals   []int64 // per slot: allocatable over usable nodes, for scarcity

	reservations map[string]*reservation
	eligible     map[string][]int32 // constraint key -> eligible node indexes
	groups       map[groupKey]*domainGroups
	domains      map[string]*domainIndex // topology label -> its domains

	// back is the cluster as it would be once every node is back (see nodesBack), built when a gang is
	// about to be rejected while some node is away; away counts those nodes.
	back *Snapshot
	away int

	// avoid, while not nil, marks the nodes a fit must leave alone: those with avoid[node] >= 0 (held for
	// a starving gang, see holds).
	avoid []int32

	// scratch, reused across Fit calls
	empty    []int64 // alloc, as the free capacity of empty nodes (fitsEmpty)
	cands    []candidate
	journal  []step
	domCands []domainCandidate
	domPos   []int32
}

type nodeInfo struct {
	Node
	usable     bool           // Ready and not Unschedulable
	away       bool           // not usable, or with a hard taint Kubernetes lifts by itself (conditionTaints)
	hardTaints []corev1.Taint // NoSchedule and NoExecute taints
	core       *corev1.Node   // name and labels only, built when a required affinity needs it
}

type reservation struct {
	placement Placement
	nodes     []int32
	deltas    []int64 // len(nodes)*width
}

// NewSnapshot builds a snapshot of nodes, with nothing used and nothing reserved. A node name that occurs
// twice keeps its first occurrence.
func NewSnapshot(nodes []Node) *Snapshot {
	sorted := make([]Node, len(nodes))
	copy(sorted, nodes)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	sorted = slices.CompactFunc(sorted, func(a, b Node) bool { return a.Name == b.Name })

	s := &Snapshot{
		nodes:        make([]nodeInfo, len(sorted)),
		byName:       make(map[string]int32, len(sorted)),
		resIndex:     map[corev1.ResourceName]int{corev1.ResourcePods: podsIndex},
		resNames:     []corev1.ResourceName{corev1.ResourcePods},
		reservations: map[string]*reservation{},
		eligible:     map[string][]int32{},
		groups:       map[groupKey]*domainGroups{},
		domains:      map[string]*domainIndex{},
	}
	var names []corev1.ResourceName
	for _, n := range sorted {
		for name := range n.Allocatable {
			if _, ok := s.resIndex[name]; !ok {
				s.resIndex[name] = -1
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	for _, name := range names {
		s.resIndex[name] = len(s.resNames)
		s.resNames = append(s.resNames, name)
	}
	w := len(s.resNames)
	s.width = w
	s.alloc = make([]int64, len(sorted)*w)
	s.totals = make([]int64, w)
	for i, n := range sorted {
		ni := &s.nodes[i]
		ni.Node = n
		ni.usable = n.Ready && !n.Unschedulable
		ni.away = !ni.usable
		for _, t := range n.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				ni.hardTaints = append(ni.hardTaints, t)
				ni.away = ni.away || isConditionTaint(t.Key)
			}
		}
		if ni.away {
			s.away++
		}
		s.byName[n.Name] = int32(i)
		base := i * w
		s.alloc[base+podsIndex] = unlimited
		for name, q := range n.Allocatable {
			s.alloc[base+s.resIndex[name]] = max(0, amount(name, q))
		}
		if ni.usable {
			for k := range w {
				s.totals[k] = satAdd(s.totals[k], s.alloc[base+k])
			}
		}
	}
	s.free = slices.Clone(s.alloc)
	return s
}

// AddUsage subtracts what one bound, non-terminal pod requests from its node's free capacity, plus one of
// the node's pods. It returns false, and changes nothing, for a node the snapshot does not know.
// Resources that no node offers are ignored.
func (s *Snapshot) AddUsage(nodeName string, requests corev1.ResourceList) bool {
	return s.addUsage(nodeName, requests, 1)
}

// addUsage counts a pod's requests on its node (sign 1), or frees them again (sign -1).
func (s *Snapshot) addUsage(nodeName string, requests corev1.ResourceList, sign int64) bool {
	i, ok := s.byName[nodeName]
	if !ok {
		return false
	}
	base := int(i) * s.width
	s.free[base+podsIndex] -= sign
	for name, q := range requests {
		k, ok := s.resIndex[name]
		if !ok || k == podsIndex {
			continue
		}
		s.free[base+k] -= sign * max(0, amount(name, q))
	}
	return true
}

// Reserve holds the capacity of placement p for gang key: free capacity drops by every assignment's
// Count times its Requests (and Count pods). It records an admission already decided, so it does not
// check that p fits. Reserving a key again replaces its earlier reservation (reserving the same placement
// twice counts it once). Assignments to nodes the snapshot does not know are ignored.
//
// Only reserve what is not running yet: pods already bound are counted by AddUsage.
func (s *Snapshot) Reserve(key string, p Placement) {
	s.Release(key)
	w := s.width
	r := &reservation{placement: slices.Clone(p)}
	for _, a := range p {
		i, ok := s.byName[a.Node]
		if !ok || a.Count <= 0 {
			continue
		}
		count := int64(a.Count)
		delta := make([]int64, w)
		delta[podsIndex] = count
		for name, q := range a.Requests {
			k, ok := s.resIndex[name]
			if !ok || k == podsIndex {
				continue
			}
			delta[k] = satMul(max(0, amount(name, q)), count)
		}
		base := int(i) * w
		for k, d := range delta {
			s.free[base+k] -= d
		}
		r.nodes = append(r.nodes, i)
		r.deltas = append(r.deltas, delta...)
	}
	s.reservations[key] = r
}

// Release gives back what Reserve held for key. Releasing a key with no reservation does nothing.
func (s *Snapshot) Release(key string) {
	r, ok := s.reservations[key]
	if !ok {
		return
	}
	w := s.width
	for j, i := range r.nodes {
		base := int(i) * w
		for k, d := range r.deltas[j*w : (j+1)*w] {
			s.free[base+k] += d
		}
	}
	delete(s.reservations, key)
}

// Reservation returns the placement reserved for key, if any.
func (s *Snapshot) Reservation(key string) (Placement, bool) {
	r, ok := s.reservations[key]
	if !ok {
		return nil, false
	}
	return slices.Clone(r.placement), true
}

// NodeFree returns what is free on a node: allocatable minus bound pods minus reservations, for every
// resource the snapshot knows (0 where the node has none; negative where it is overcommitted). "pods" is
// left out when the node declares no pods allocatable.
func (s *Snapshot) NodeFree(nodeName string) (corev1.ResourceList, bool) {
	i, ok := s.byName[nodeName]
	if !ok {
		return nil, false
	}
	base := int(i) * s.width
	out := make(corev1.ResourceList, s.width)
	for k, name := range s.resNames {
		if k == podsIndex && s.alloc[base+k] == unlimited {
			continue
		}
		out[name] = quantity(name, s.free[base+k])
	}
	return out, true
}

// amount converts a quantity to the snapshot's integer unit: millicores for cpu, the plain unit (rounded
// up) for everything else.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// quantity is the inverse of amount.
func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	switch {
	case name == corev1.ResourceCPU:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case isByteResource(name):
		return *resource.NewQuantity(v, resource.BinarySI)
	default:
		return *resource.NewQuantity(v, resource.DecimalSI)
	}
}

func isByteResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// formatAmount renders v of resource name for a message.
func formatAmount(name corev1.ResourceName, v int64) string {
	q := quantity(name, v)
	return q.String()
}

func satAdd(a, b int64) int64 {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// satMul multiplies non-negative a and b, saturating at unlimited.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > unlimited/b {
		return unlimited
	}
	return a * b
}
