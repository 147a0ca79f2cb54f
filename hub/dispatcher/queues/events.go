package queues

// A pass that parks the queues at rest is right only if it learns of every change of what dispatch.Plan
// reads. Each change reaches it as an event, one type per kind of change, and each event wakes the
// queues it names: their components (dispatch.ComponentOf) are walked by the pass, not parked.
// planInputs names, for every field of dispatch.Snapshot, the events that change it;
// TestEveryPlanInputHasAnEvent fails for a field that has none, so a new input cannot be forgotten.

// Event is a change of something dispatch.Plan reads, as a pass learns of it.
type Event interface {
	// wake marks what the event wakes.
	wake(w *waking)
}

// waking is what the events of one pass woke.
type waking struct {
	// all is the event that woke everything, if one did: every workload is walked and settled anew,
	// nothing is parked or cut.
	all Event
	// components woken, by name; capacity: those whose workloads waited for room a capacity report shows.
	components map[string]bool
	capacity   bool
	p          *passRest
	r          *resolver
}

// queue wakes the component of the GlobalQueue; "" is none.
func (w *waking) queue(gq string) {
	if gq != "" {
		w.components[w.p.component(gq)] = true
	}
}

// entry wakes the components of the GlobalQueue the entry's Queue names now and of the one its status
// records.
func (w *waking) entry(e *entry) {
	gq, _ := w.r.resolve(e.queue)
	w.queue(gq)
	w.queue(e.recordedQueue)
}

// Resync: the manager does not know what the last pass decided over (the first pass, or the dispatcher's
// safety net asked for a walk over everything, Forget). It wakes everything.
type Resync struct{}

func (e Resync) wake(w *waking) { w.all = e }

// SpecChanged: a GlobalQueue's, Queue's or Cohort's spec or a Namespace's labels changed, or one of them
// came or went (but QuotaGrew). It wakes everything.
type SpecChanged struct{ Kind, Namespace, Name string }

func (e SpecChanged) wake(w *waking) { w.all = e }

// QuotaGrew: a GlobalQueue without a cohort changed only by quota that grew (seenSpecs.changes). It
// wakes that queue's component; its settled entries stay settled.
type QuotaGrew struct{ GlobalQueue string }

func (e QuotaGrew) wake(w *waking) { w.queue(e.GlobalQueue) }

// ClusterChanged: a cluster came or went, or its connection, readiness, cordon, fence or kinds changed
// (sameAvailability). It wakes everything.
type ClusterChanged struct{ Cluster string }

func (e ClusterChanged) wake(w *waking) { w.all = e }

// CapacityReported: a cluster's capacity report changed. It wakes the components some of whose
// workloads waited for room a report shows (dispatch.Result.ReadCapacity).
type CapacityReported struct{ Cluster string }

func (CapacityReported) wake(w *waking) { w.capacity = true }

// WorkloadChanged: the book took in a Workload added or changed, admitted and finished ones included.
// It wakes the queues of the entry.
type WorkloadChanged struct{ e *entry }

func (c WorkloadChanged) wake(w *waking) { w.entry(c.e) }

// WorkloadLeft: a Workload left the book, or a change replaced its entry. It wakes the GlobalQueue the
// last pass saw it under.
type WorkloadLeft struct{ GlobalQueue string }

func (l WorkloadLeft) wake(w *waking) { w.queue(l.GlobalQueue) }

// OwnWrite: a write of the dispatcher stands in for a Workload in this pass (Read.Own), or stood in for
// one in the last pass (OwnWriteSeen). It wakes the queues of the entry.
type OwnWrite struct{ e *entry }

func (o OwnWrite) wake(w *waking) { w.entry(o.e) }

// OwnWriteSeen: the last pass laid a write of the dispatcher over a Workload of the GlobalQueue; this one
// decides over what became of it. It wakes that queue.
type OwnWriteSeen struct{ GlobalQueue string }

func (o OwnWriteSeen) wake(w *waking) { w.queue(o.GlobalQueue) }

// CopiesRead: a nominated workload's copies are read on the workers as every pass goes. A pass that
// parked its component could take in a change of a copy (one admitted a moment before) without
// deciding on it, so it wakes the queues of the entry, every pass.
type CopiesRead struct{ e *entry }

func (c CopiesRead) wake(w *waking) { w.entry(c.e) }

// RejectionLapsed: a cluster's rejection of a waiting workload lapsed since the last pass. It wakes the
// queues of the entry.
type RejectionLapsed struct{ e *entry }

func (l RejectionLapsed) wake(w *waking) { w.entry(l.e) }

// Decided: the last pass decided something for a workload, or held a verdict of it back
// (dispatch.Result.Held, waiting for the time the verdict is written). Its component is not at rest:
// the next pass walks it.
type Decided struct{ Key string }

func (Decided) wake(*waking) {} // rest.end keeps the component from rest

// planInputs are the fields of dispatch.Snapshot, each with the events that change it.
var planInputs = map[string][]Event{
	"Clusters.Name":                            {ClusterChanged{}},
	"Clusters.Connected":                       {ClusterChanged{}},
	"Clusters.Connecting":                      {ClusterChanged{}},
	"Clusters.AgentReady":                      {ClusterChanged{}},
	"Clusters.Cordoned":                        {ClusterChanged{}},
	"Clusters.Labels":                          {ClusterChanged{}},
	"Clusters.Price.GPU":                       {ClusterChanged{}},
	"Clusters.Price.CPU":                       {ClusterChanged{}},
	"Clusters.Price.HasCPU":                    {ClusterChanged{}},
	"Clusters.Fenced":                          {ClusterChanged{}},
	"Clusters.GPUs.Product":                    {CapacityReported{}},
	"Clusters.GPUs.Allocatable":                {CapacityReported{}},
	"Clusters.GPUs.Free":                       {CapacityReported{}},
	"Clusters.GPUs.LargestFreeOnNode":          {CapacityReported{}},
	"Clusters.GPUs.LargestAllocatableOnNode":   {CapacityReported{}},
	"Clusters.Kinds":                           {ClusterChanged{}},
	"Clusters.Resources.Name":                  {CapacityReported{}},
	"Clusters.Resources.Allocatable":           {CapacityReported{}},
	"Clusters.Resources.Free":                  {CapacityReported{}},
	"Clusters.Resources.LargestFreeOnNode":     {CapacityReported{}},
	"Clusters.Resources.Admitted":              {CapacityReported{}},
	"Queues.Name":                              {SpecChanged{}},
	"Queues.StrictFIFO":                        {SpecChanged{}},
	"Queues.MaxCandidates":                     {SpecChanged{}},
	"Queues.Clusters":                          {SpecChanged{}},
	"Queues.Quota":                             {SpecChanged{}, QuotaGrew{}},
	"Queues.Cohort":                            {SpecChanged{}},
	"Queues.BorrowingLimit":                    {SpecChanged{}},
	"Queues.LendingLimit":                      {SpecChanged{}},
	"Queues.Weight":                            {SpecChanged{}},
	"Queues.Scores.Name":                       {SpecChanged{}},
	"Queues.Scores.Weight":                     {SpecChanged{}},
	"Queues.PreferredClusters":                 {SpecChanged{}},
	"Queues.Incremental":                       {SpecChanged{}},
	"Queues.Preemption.WithinQueue":            {SpecChanged{}},
	"Queues.Preemption.ReclaimWithinCohort":    {SpecChanged{}},
	"Queues.Preemption.FairSharing":            {SpecChanged{}},
	"Cohorts.Name":                             {SpecChanged{}},
	"Cohorts.Parent":                           {SpecChanged{}},
	"Cohorts.Quota":                            {SpecChanged{}},
	"Cohorts.LendingLimit":                     {SpecChanged{}},
	"Cohorts.Weight":                           {SpecChanged{}},
	"Workloads.Key":                            {WorkloadChanged{}, WorkloadLeft{}},
	"Workloads.GlobalQueue":                    {WorkloadChanged{}, OwnWrite{}, SpecChanged{}},
	"Workloads.QueueProblem.Reason":            {WorkloadChanged{}, SpecChanged{}},
	"Workloads.QueueProblem.Message":           {WorkloadChanged{}, SpecChanged{}},
	"Workloads.Priority":                       {WorkloadChanged{}},
	"Workloads.Created":                        {WorkloadChanged{}},
	"Workloads.Requests":                       {WorkloadChanged{}},
	"Workloads.GPU.Total":                      {WorkloadChanged{}},
	"Workloads.GPU.PerPod":                     {WorkloadChanged{}},
	"Workloads.GPU.Products":                   {WorkloadChanged{}},
	"Workloads.PendingReason":                  {WorkloadChanged{}, OwnWrite{}},
	"Workloads.PendingMessage":                 {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Phase":                          {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Epoch":                          {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Nominated":                      {WorkloadChanged{}, OwnWrite{}},
	"Workloads.NominatedQueue":                 {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Winner":                         {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Refused.RejectedAt":             {WorkloadChanged{}, OwnWrite{}, RejectionLapsed{}},
	"Workloads.Refused.EvictedFrom.Count":      {WorkloadChanged{}},
	"Workloads.Refused.EvictedFrom.LastReason": {WorkloadChanged{}},
	"Workloads.Kind":                           {WorkloadChanged{}},
	"Workloads.DataLocation":                   {WorkloadChanged{}},
	"Workloads.Run":                            {WorkloadChanged{}},
	"Workloads.CheckpointInterval":             {WorkloadChanged{}},
	"Workloads.CheckpointedOn":                 {WorkloadChanged{}},
	"Workloads.Stopped":                        {WorkloadChanged{}},
	"Workloads.PreemptedFor":                   {WorkloadChanged{}, OwnWrite{}},
	"Workloads.Copies.Cluster":                 {CopiesRead{}},
	"Workloads.Copies.Admitted":                {CopiesRead{}},
	"Workloads.Copies.AdmittedAt":              {CopiesRead{}},
	"Workloads.Copies.Rejected":                {CopiesRead{}},
	"Workloads.Copies.Waiting":                 {CopiesRead{}},
	"Workloads.Copies.Expired":                 {CopiesRead{}},
	"Workloads.Copies.Reason":                  {CopiesRead{}},
	"Workloads.Copies.Message":                 {CopiesRead{}},
	"Workloads.Copies.WouldFitWithout":         {CopiesRead{}},
	"Tallies.GlobalQueue":                      {WorkloadChanged{}, OwnWrite{}},
	"Tallies.Cluster":                          {WorkloadChanged{}, OwnWrite{}},
	"Tallies.Priority":                         {WorkloadChanged{}, OwnWrite{}},
	"Tallies.Requests":                         {WorkloadChanged{}, OwnWrite{}},
	"Tallies.Workloads":                        {WorkloadChanged{}, OwnWrite{}, WorkloadLeft{}},
	"Tallied":                                  {WorkloadChanged{}, OwnWrite{}, WorkloadLeft{}},
	"Cuts.First":                               {WorkloadChanged{}, OwnWrite{}},
	"Cuts.Least":                               {WorkloadChanged{}, OwnWrite{}},
	// Time: rejections lapse, and verdicts held back come due, by it.
	"Now": {RejectionLapsed{}, Decided{}},
	// Set when the dispatcher starts, whose first pass walks everything.
	"RejectionTTL":     {Resync{}},
	"Proposed.Reason":  {Decided{}},
	"Proposed.Message": {Decided{}},
	"Proposed.Since":   {Decided{}},
	"AgentNews":        {Decided{}},
}
