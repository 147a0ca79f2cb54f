package dispatch

// The filters every GlobalQueue's clusters pass, in pipeline order (leftOutAt runs them).
var _ = []filter{knownCluster{}, notRefused{}, quotaCeiling{}, usableCluster{}, quotaRoom{}, capacityRoom{}}

// knownCluster leaves out clusters the queue lists that are not registered.
type knownCluster struct{}

func (knownCluster) stage() stage { return stageNever }
func (knownCluster) admits(_ *Workload, _ []int64, c *clusterLedger) bool {
	return c.known
}

// notRefused leaves out clusters whose agent rejected the workload, or that do not run its kind.
type notRefused struct{}

func (notRefused) stage() stage { return stageNever }
func (notRefused) admits(w *Workload, _ []int64, c *clusterLedger) bool {
	return !w.refusedBy(c)
}

// quotaCeiling leaves out clusters where the queue could not hold the workload even with nothing else
// running: beyond its quota and all it may borrow there.
type quotaCeiling struct{}

func (quotaCeiling) stage() stage { return stageNever }
func (quotaCeiling) admits(_ *Workload, vec []int64, c *clusterLedger) bool {
	return c.couldEverFit(vec)
}

// usableCluster leaves out clusters that take no copies now: not connected, no ready agent, cordoned
// or fenced.
type usableCluster struct{}

func (usableCluster) stage() stage { return stageUnavailable }
func (usableCluster) admits(_ *Workload, _ []int64, c *clusterLedger) bool {
	return c.cluster.Usable()
}

// quotaRoom leaves out clusters where the queue's quota (and what it may borrow) has no room for the
// workload besides what is admitted and reserved there.
type quotaRoom struct{}

func (quotaRoom) stage() stage { return stageQuota }
func (quotaRoom) admits(_ *Workload, vec []int64, c *clusterLedger) bool {
	return c.fits(vec, true)
}

// capacityRoom leaves out clusters whose last capacity report shows no node with the GPUs the
// workload's largest pod needs, or too few free in all: a copy there would only wait, and its agent
// reports when GPUs free up. Unless the workload may preempt there: its copy then asks the agent which
// running workloads would make room by going.
type capacityRoom struct{}

func (capacityRoom) stage() stage { return stageCapacity }
func (capacityRoom) admits(w *Workload, _ []int64, c *clusterLedger) bool {
	return w.GPU.PerPod <= 0 || c.cluster.MayFitNow(w.GPU) || c.mayMakeRoomFor(w)
}

// productPreference keeps, for a workload with an order of GPU products, only the clusters with room
// for the best-ranked product any of them has room for: whichever admits first, the job gets it.
type productPreference struct{}

func (productPreference) keep(w *Workload, ql *queueLedger, passed []int) []int {
	if len(w.GPU.Products) <= 1 {
		return passed
	}
	preferred := len(w.GPU.Products)
	for _, i := range passed {
		preferred = min(preferred, ql.clusters[i].cluster.ProductRank(w.GPU))
	}
	kept := passed[:0]
	for _, i := range passed {
		if ql.clusters[i].cluster.ProductRank(w.GPU) <= preferred {
			kept = append(kept, i)
		}
	}
	return kept
}
