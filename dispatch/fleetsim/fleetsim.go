// Package fleetsim plays a trace of jobs through dispatch.Plan over a simulated fleet, in virtual time,
// with no I/O: agents admit a copy when every pod of its gang finds a node with its GPUs free, the hub
// confirms winners and withdraws losers as it does, jobs run for their time and end. It measures what a
// dispatching policy does to the same trace (where jobs ran, what they cost, how long they waited), so
// that policies are compared side by side, not timed.
package fleetsim

import (
	"cmp"
	"math"
	"slices"
	"time"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Cluster is one simulated worker: Nodes nodes of GPUsPerNode GPUs of one Product.
type Cluster struct {
	Name        string
	Nodes       int
	GPUsPerNode int
	Product     string
	Price       *dispatch.Price
	Labels      map[string]string
}

// Job is one job of the trace: it arrives at Arrive (from the start of the run), asks for Pods pods of
// GPUsPerPod GPUs each, and runs for Run once started.
type Job struct {
	Name         string
	Queue        string
	Priority     int32
	Arrive       time.Duration
	Run          time.Duration
	Pods         int
	GPUsPerPod   int
	DataLocation []gantry.LabelTerm
	// CheckpointEvery is how often the job saves its work (0: never): taken back, it loses what it did
	// since its last checkpoint, and runs again from there.
	CheckpointEvery time.Duration
}

// Fleet is what the jobs are dispatched over: its clusters and the GlobalQueues (and Cohorts) the jobs
// name.
type Fleet struct {
	Clusters []Cluster
	Queues   []*dispatch.GlobalQueue
	Cohorts  []*dispatch.Cohort
}

// Outcome is what became of one job.
type Outcome struct {
	Job     Job
	Cluster string
	// Started and Ended count from the start of the run; Started is the last start, Ended is 0 for a job
	// still waiting or running when the run stopped.
	Started time.Duration
	Ended   time.Duration
	// Cost is what its GPUs cost for the time they ran, at its cluster's price (0 without one).
	Cost float64
	// GPUHours is the GPU time it ran; LostGPUHours the part of it lost when it was taken back.
	GPUHours     float64
	LostGPUHours float64
	// TakenBack counts the times it was.
	TakenBack int
	// Forecast is when it was forecast to start when it arrived, had it to wait (dispatch.ForecastStart,
	// from its queue's starts and what was ahead of it); unknown for one dispatched at once.
	Forecast dispatch.Forecast
}

// Wait is how long the job waited from its arrival to its start.
func (o Outcome) Wait() time.Duration { return o.Started - o.Job.Arrive }

// Options tune a run.
type Options struct {
	// Step is the virtual time between dispatch passes (default 1s).
	Step time.Duration
	// Until stops the run (default: when every job ended, at most 100 days).
	Until time.Duration
	// KnowCheckpoints tells the dispatcher each job's checkpoint interval and run (as a job's annotation
	// gantry.dev/checkpoint-interval and its Workload's runs do); without, it knows neither.
	KnowCheckpoints bool
}

// Run plays the trace over the fleet and returns each job's outcome, in the trace's order.
func Run(f Fleet, trace []Job, opts Options) []Outcome {
	sim := newSim(f, trace, opts)
	for !sim.done() {
		sim.tick()
	}
	return sim.outcomes()
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// sim is a run in progress.
type sim struct {
	opts     Options
	fleet    Fleet
	trace    []Job
	nodes    map[string][]int // free GPUs per node, by cluster
	s        *dispatch.Snapshot
	now      time.Duration
	next     int // the next job of the trace to arrive
	jobs     map[string]*running
	finished int
	// starts are the jobs each queue started, for forecasts; arrived the workloads of this tick.
	starts  map[string][]dispatch.Start
	arrived []*dispatch.Workload
}

// running is the simulator's record of one arrived job.
type running struct {
	job      Job
	w        *dispatch.Workload
	outcome  Outcome
	holds    map[string][]int // GPUs held per node, by cluster where a copy is admitted or the job runs
	endsAt   time.Duration
	finished bool
	// start is the index of its current run in its queue's starts.
	start int
	// saved is the work done and saved by checkpoints over its runs so far.
	saved time.Duration
}

func newSim(f Fleet, trace []Job, opts Options) *sim {
	if opts.Step <= 0 {
		opts.Step = time.Second
	}
	if opts.Until <= 0 {
		opts.Until = 100 * 24 * time.Hour
	}
	trace = slices.Clone(trace)
	slices.SortStableFunc(trace, func(a, b Job) int { return cmp.Compare(a.Arrive, b.Arrive) })
	s := &dispatch.Snapshot{Clusters: map[string]dispatch.Cluster{}, Queues: map[string]*dispatch.GlobalQueue{},
		Cohorts: map[string]*dispatch.Cohort{}}
	for _, q := range f.Queues {
		s.Queues[q.Name] = q
	}
	for _, c := range f.Cohorts {
		s.Cohorts[c.Name] = c
	}
	sm := &sim{opts: opts, fleet: f, trace: trace, nodes: map[string][]int{}, s: s, jobs: map[string]*running{},
		starts: map[string][]dispatch.Start{}}
	for _, c := range f.Clusters {
		free := make([]int, c.Nodes)
		for i := range free {
			free[i] = c.GPUsPerNode
		}
		sm.nodes[c.Name] = free
	}
	return sm
}

func (sm *sim) done() bool {
	return sm.now >= sm.opts.Until || (sm.next == len(sm.trace) && sm.finished == len(sm.trace))
}

// tick is one step of virtual time: jobs end and arrive, agents report, the hub plans and acts, and
// agents answer the copies.
func (sm *sim) tick() {
	sm.finish()
	sm.arrive()
	sm.report()
	sm.s.Now = epoch.Add(sm.now)
	res := dispatch.Plan(sm.s)
	sm.s.Proposed = res.Proposed
	sm.apply(res)
	sm.forecast()
	sm.admit()
	sm.now += sm.opts.Step
}

// forecast forecasts the start of each job that arrived in this tick and must wait: no cluster was
// nominated for it.
func (sm *sim) forecast() {
	for _, w := range sm.arrived {
		if w.Phase != dispatch.Pending || len(w.Nominated) > 0 {
			continue
		}
		_, _, ahead := dispatch.QueuePosition(sm.s, w)
		sm.jobs[w.Key].outcome.Forecast = dispatch.ForecastStart(sm.starts[w.GlobalQueue], w.GPU.Total, ahead, epoch.Add(sm.now))
	}
	sm.arrived = sm.arrived[:0]
}

// arrive adds the jobs whose time came as pending workloads.
func (sm *sim) arrive() {
	for ; sm.next < len(sm.trace) && sm.trace[sm.next].Arrive <= sm.now; sm.next++ {
		j := sm.trace[sm.next]
		gpus := int64(j.Pods * j.GPUsPerPod)
		w := &dispatch.Workload{Key: "sim/" + j.Name, GlobalQueue: j.Queue, Priority: j.Priority, Created: epoch.Add(j.Arrive),
			Requests: dispatch.Resources{gantry.GPUResource: gpus * 1000},
			GPU:      dispatch.GPUDemand{Total: gpus, PerPod: int64(j.GPUsPerPod)}, DataLocation: j.DataLocation}
		sm.jobs[w.Key] = &running{job: j, w: w, outcome: Outcome{Job: j}, holds: map[string][]int{}}
		sm.s.Workloads = append(sm.s.Workloads, w)
		sm.arrived = append(sm.arrived, w)
	}
}

// finish ends the jobs whose time is up, freeing their GPUs, and drops them from the snapshot.
func (sm *sim) finish() {
	kept := sm.s.Workloads[:0]
	for _, w := range sm.s.Workloads {
		r := sm.jobs[w.Key]
		if w.Phase == dispatch.Admitted && r.endsAt <= sm.now {
			sm.release(r, w.Winner)
			sm.starts[w.GlobalQueue][r.start].Ended = epoch.Add(sm.now)
			r.outcome.Ended, r.finished = sm.now, true
			r.outcome.GPUHours += (sm.now - r.outcome.Started).Hours() * float64(w.GPU.Total)
			r.outcome.Cost += (sm.now - r.outcome.Started).Hours() * float64(w.GPU.Total) * sm.price(w.Winner)
			sm.finished++
			continue
		}
		kept = append(kept, w)
	}
	sm.s.Workloads = kept
}

func (sm *sim) price(cluster string) float64 {
	for _, c := range sm.fleet.Clusters {
		if c.Name == cluster && c.Price != nil {
			if v := c.Price.PerGPUHour(c.Product); !math.IsNaN(v) {
				return v
			}
		}
	}
	return 0
}

// report is each agent's capacity report: what its nodes have free now.
func (sm *sim) report() {
	for _, c := range sm.fleet.Clusters {
		var free, largest int64
		for _, n := range sm.nodes[c.Name] {
			free, largest = free+int64(n), max(largest, int64(n))
		}
		sm.s.Clusters[c.Name] = dispatch.Cluster{Name: c.Name, Connected: true, AgentReady: true, Labels: c.Labels, Price: c.Price,
			GPUs: []dispatch.GPUCapacity{{Product: c.Product, Allocatable: int64(c.Nodes * c.GPUsPerNode), Free: free,
				LargestFreeOnNode: largest, LargestAllocatableOnNode: int64(c.GPUsPerNode)}}}
	}
}

// outcomes are the jobs' outcomes in the trace's order; a job that did not arrive has none.
func (sm *sim) outcomes() []Outcome {
	out := make([]Outcome, 0, len(sm.jobs))
	for _, j := range sm.trace {
		if r, ok := sm.jobs["sim/"+j.Name]; ok {
			out = append(out, r.outcome)
		}
	}
	return out
}

// fits places a gang of pods of perPod GPUs on the free GPUs of nodes, first fit, and returns what it
// takes of each node; nil when it does not fit.
func fits(free []int, pods, perPod int) []int {
	take := make([]int, len(free))
	for range pods {
		i := -1
		for n := range free {
			if free[n]-take[n] >= perPod {
				i = n
				break
			}
		}
		if i < 0 {
			return nil
		}
		take[i] += perPod
	}
	return take
}
