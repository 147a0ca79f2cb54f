package admission

import (
	"slices"
	"sort"
)

// domainIndex numbers the values of one topology label: a domain's id is its value's index in values,
// so id order is value order.
type domainIndex struct {
	values []string // sorted, distinct, none empty
	of     []int32  // per node: its domain id, or -1 if it lacks the label or its value is empty
}

// domainsOf returns the domains of label key over all nodes, computed once per snapshot.
func (s *Snapshot) domainsOf(key string) *domainIndex {
	if d, ok := s.domains[key]; ok {
		return d
	}
	d := &domainIndex{of: make([]int32, len(s.nodes))}
	for i := range s.nodes {
		if v := s.nodes[i].Labels[key]; v != "" {
			d.values = append(d.values, v)
		}
	}
	slices.Sort(d.values)
	d.values = slices.Compact(d.values)
	for i := range s.nodes {
		d.of[i] = -1
		// An empty value counts as no label, so that a gang's Domain is never empty.
		if v := s.nodes[i].Labels[key]; v != "" {
			d.of[i] = int32(sort.SearchStrings(d.values, v))
		}
	}
	s.domains[key] = d
	return d
}

// groupKey identifies the eligible nodes of a pod set's constraints, narrowed to one GPU product ("" for
// any) and split by the values of one topology label ("" for no split).
type groupKey struct {
	constraints string
	product     string
	topology    string
}

// domainGroups are eligible nodes split by topology domain, only domains with at least one node. Without
// a topology label there is one group, of id 0, holding them all (none if there are no eligible nodes).
type domainGroups struct {
	ids   []int32   // ascending
	nodes [][]int32 // per group, node indexes in name order
}

// find returns the position of domain id among the groups, or -1.
func (g *domainGroups) find(id int32) int {
	i, ok := slices.BinarySearch(g.ids, id)
	if !ok {
		return -1
	}
	return i
}

// groupsOf returns the nodes eligible for ps (whose constraintKey is ck) that carry product (any node if
// product is empty), split by the values of the label topology (not split if it is empty). Like
// eligibility, it depends only on the nodes, so it is cached.
func (s *Snapshot) groupsOf(ck string, ps *PodSet, product, topology string) *domainGroups {
	k := groupKey{constraints: ck, product: product, topology: topology}
	if g, ok := s.groups[k]; ok {
		return g
	}
	nodes := s.eligibleByKey(ck, ps)
	if product != "" {
		var kept []int32
		for _, n := range nodes {
			if v, ok := s.nodes[n].Labels[GPUProductLabel]; ok && v == product {
				kept = append(kept, n)
			}
		}
		nodes = kept
	}
	g := &domainGroups{}
	switch {
	case len(nodes) == 0:
	case topology == "":
		g.ids = []int32{0}
		g.nodes = [][]int32{nodes}
	default:
		d := s.domainsOf(topology)
		// Count the nodes of each domain, then lay the groups out in one backing slice.
		counts := make([]int32, len(d.values))
		for _, n := range nodes {
			if id := d.of[n]; id >= 0 {
				counts[id]++
			}
		}
		backing := make([]int32, 0, len(nodes))
		start := make([]int, len(d.values))
		for id, c := range counts {
			if c > 0 {
				g.ids = append(g.ids, int32(id))
			}
			start[id] = len(backing)
			backing = backing[:len(backing)+int(c)]
		}
		fill := slices.Clone(start)
		for _, n := range nodes {
			if id := d.of[n]; id >= 0 {
				backing[fill[id]] = n
				fill[id]++
			}
		}
		g.nodes = make([][]int32, len(g.ids))
		for j, id := range g.ids {
			g.nodes[j] = backing[start[id]:fill[id]:fill[id]]
		}
	}
	s.groups[k] = g
	return g
}
