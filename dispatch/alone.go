package dispatch

import "slices"

// A workload goes to one cluster alone, not to maxCandidates, where that cluster's last capacity report
// leaves room for it with a margin: a second copy would only be withdrawn, three writes on its cluster
// for nothing. Where the room is tight, or the report says nothing of a resource the workload asks
// for, its copies race on maxCandidates clusters and the first admitted wins. A workload sent alone
// whose copy cannot be admitted now widens to maxCandidates (widens): a report that trailed costs a
// round trip, never the job. Reports trail: what was nominated, and won, since a cluster's report is
// counted as taken there (the pass's flying).

// aloneMargin is the share, in percent, of a cluster's allocatable of each resource that its report
// must show free beyond the workload's requests and the copies in flight there: what the hub cannot
// count, such as pods that are not Gantry's started since the report.
const aloneMargin = 10

// byCluster is requests summed per cluster. A pass's flying are, per cluster, the requests its last
// report does not count yet: those of the snapshot's nominated workloads and of the pass's
// nominations, and what the workloads won there ask for beyond what the report says its admitted
// copies ask for (admissions since the report; reports follow admissions at most every 5 s).
type byCluster map[string]Resources

func (f byCluster) add(clusters []string, req Resources) {
	for _, c := range clusters {
		f.addTo(c, req)
	}
}

func (f byCluster) addTo(cluster string, req Resources) {
	r := f[cluster]
	if r == nil {
		r = Resources{}
		f[cluster] = r
	}
	r.Add(req)
}

// addUnreported adds, per cluster, what the workloads won there ask for beyond what its last report
// says its admitted copies ask for. A report that counts more (jobs that finished since, as the hub
// has recorded) adds nothing; an agent that does not say leaves its admissions to the margin.
func (f byCluster) addUnreported(clusters map[string]Cluster, won byCluster) {
	for name, req := range won {
		c := clusters[name]
		for i := range c.Resources {
			r := &c.Resources[i]
			if beyond := req[r.Name] - r.Admitted; r.Admitted != AdmittedNotReported && beyond > 0 {
				f.addTo(name, Resources{r.Name: beyond})
			}
		}
	}
}

// fitsAlone says whether the cluster's last report leaves room for the workload with the margin: the
// whole workload fits on the node with the most free of each resource it requests, and the cluster's
// free, less flying, exceeds its requests by aloneMargin percent of its allocatable. A workload that
// names GPU products never goes alone: the report's room is not counted per product.
func fitsAlone(w *Workload, c *Cluster, flying Resources) bool {
	if len(w.GPU.Products) > 0 || len(c.Resources) == 0 || len(w.Requests) == 0 {
		return false
	}
	for name, req := range w.Requests {
		if req <= 0 {
			continue
		}
		i := slices.IndexFunc(c.Resources, func(r ResourceRoom) bool { return r.Name == name })
		if i < 0 {
			return false
		}
		r := &c.Resources[i]
		if req > r.LargestFreeOnNode || r.Free-flying[name]-req < r.Allocatable/100*aloneMargin {
			return false
		}
	}
	return true
}
