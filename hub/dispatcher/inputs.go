package dispatcher

// A pass that parks quiet components (rest) is right only if it learns of every change of what
// dispatch.Plan reads. planInputs names, for every field of dispatch.Snapshot (a dotted path through
// its types), the ways a pass learns that it changed; TestEveryPlanInputHasAWayToBeNoticed fails for a
// field that has none, so a new input cannot be forgotten.

// notice is a way a pass learns that something a component decides over changed.
type notice string

const (
	// bookChange: the book's changes since the last pass (touched, left): a Workload added, changed or
	// removed, admitted ones included; the tallies and cuts are made from the book.
	bookChange notice = "the book's changes (touched, left)"
	// overlaidWrite: the dispatcher's own writes laid over the book (the overlay), this pass's and the last.
	overlaidWrite notice = "the dispatcher's own writes (overlay)"
	// copiesRead: a nominated workload's copies are read on the workers as the pass goes, so a
	// component with a nominated workload is walked every pass (watchedChanged).
	copiesRead notice = "copies read every pass (watched)"
	// rejectionLapse: time passing a recorded rejection's end; the book's watched entries are looked at
	// before every walk (watchedChanged).
	rejectionLapse notice = "a rejection that lapsed (watched)"
	// specChange: a GlobalQueue's, Queue's or Cohort's spec or a Namespace's labels (seenSpecs): the
	// pass walks everything, but for quota that only grew.
	specChange notice = "a spec or labels (seenSpecs)"
	// availabilityChange: a cluster's connection, readiness, cordon, fence or kinds (sameAvailability):
	// the pass walks everything.
	availabilityChange notice = "a cluster's availability (sameAvailability)"
	// capacityChange: a cluster's capacity report (sameCapacity), for the components that waited for
	// room one shows (dispatch.Result.ReadCapacity).
	capacityChange notice = "a capacity report (sameCapacity)"
	// heldVerdict: what the last pass held back (dispatch.Result.Held) keeps its component walked.
	heldVerdict notice = "a verdict held back (Result.Held)"
	// fixedAtStart: set when the dispatcher starts, the same for every pass.
	fixedAtStart notice = "fixed when the dispatcher starts"
)

// planInputs are the fields of dispatch.Snapshot, each with the ways a pass learns that it changed.
var planInputs = map[string][]notice{
	"Clusters.Name":                          {availabilityChange},
	"Clusters.Connected":                     {availabilityChange},
	"Clusters.Connecting":                    {availabilityChange},
	"Clusters.AgentReady":                    {availabilityChange},
	"Clusters.Cordoned":                      {availabilityChange},
	"Clusters.Fenced":                        {availabilityChange},
	"Clusters.GPUs.Product":                  {capacityChange},
	"Clusters.GPUs.Allocatable":              {capacityChange},
	"Clusters.GPUs.Free":                     {capacityChange},
	"Clusters.GPUs.LargestFreeOnNode":        {capacityChange},
	"Clusters.GPUs.LargestAllocatableOnNode": {capacityChange},
	"Clusters.Kinds":                         {availabilityChange},
	"Queues.Name":                            {specChange},
	"Queues.StrictFIFO":                      {specChange},
	"Queues.MaxCandidates":                   {specChange},
	"Queues.Clusters":                        {specChange},
	"Queues.Quota":                           {specChange},
	"Queues.Cohort":                          {specChange},
	"Queues.BorrowingLimit":                  {specChange},
	"Queues.LendingLimit":                    {specChange},
	"Queues.Weight":                          {specChange},
	"Queues.Scores.Name":                     {specChange},
	"Queues.Scores.Weight":                   {specChange},
	"Queues.PreferredClusters":               {specChange},
	"Queues.Incremental":                     {specChange},
	"Queues.Preemption.WithinQueue":          {specChange},
	"Queues.Preemption.ReclaimWithinCohort":  {specChange},
	"Queues.Preemption.FairSharing":          {specChange},
	"Cohorts.Name":                           {specChange},
	"Cohorts.Parent":                         {specChange},
	"Cohorts.Quota":                          {specChange},
	"Cohorts.LendingLimit":                   {specChange},
	"Cohorts.Weight":                         {specChange},
	"Workloads.Key":                          {bookChange},
	"Workloads.GlobalQueue":                  {bookChange, overlaidWrite, specChange},
	"Workloads.QueueProblem.Reason":          {bookChange, specChange},
	"Workloads.QueueProblem.Message":         {bookChange, specChange},
	"Workloads.Priority":                     {bookChange},
	"Workloads.Created":                      {bookChange},
	"Workloads.Requests":                     {bookChange},
	"Workloads.GPU.Total":                    {bookChange},
	"Workloads.GPU.PerPod":                   {bookChange},
	"Workloads.GPU.Products":                 {bookChange},
	"Workloads.PendingReason":                {bookChange, overlaidWrite},
	"Workloads.PendingMessage":               {bookChange, overlaidWrite},
	"Workloads.Phase":                        {bookChange, overlaidWrite},
	"Workloads.Epoch":                        {bookChange, overlaidWrite},
	"Workloads.Nominated":                    {bookChange, overlaidWrite},
	"Workloads.NominatedQueue":               {bookChange, overlaidWrite},
	"Workloads.Winner":                       {bookChange, overlaidWrite},
	"Workloads.RejectedAt":                   {bookChange, overlaidWrite, rejectionLapse},
	"Workloads.EvictedFrom.Count":            {bookChange},
	"Workloads.EvictedFrom.LastReason":       {bookChange},
	"Workloads.Kind":                         {bookChange},
	"Workloads.PreemptedFor":                 {bookChange, overlaidWrite},
	"Workloads.Copies.Cluster":               {copiesRead},
	"Workloads.Copies.Admitted":              {copiesRead},
	"Workloads.Copies.AdmittedAt":            {copiesRead},
	"Workloads.Copies.Rejected":              {copiesRead},
	"Workloads.Copies.Waiting":               {copiesRead},
	"Workloads.Copies.Expired":               {copiesRead},
	"Workloads.Copies.Reason":                {copiesRead},
	"Workloads.Copies.Message":               {copiesRead},
	"Workloads.Copies.WouldFitWithout":       {copiesRead},
	"Tallies.GlobalQueue":                    {bookChange, overlaidWrite},
	"Tallies.Cluster":                        {bookChange, overlaidWrite},
	"Tallies.Priority":                       {bookChange, overlaidWrite},
	"Tallies.Requests":                       {bookChange, overlaidWrite},
	"Tallies.Workloads":                      {bookChange, overlaidWrite},
	"Tallied":                                {bookChange, overlaidWrite},
	"Cuts.First":                             {bookChange, overlaidWrite},
	"Cuts.Least":                             {bookChange, overlaidWrite},
	"Now":                                    {rejectionLapse, heldVerdict},
	"RejectionTTL":                           {fixedAtStart},
	"Proposed.Reason":                        {heldVerdict},
	"Proposed.Message":                       {heldVerdict},
	"Proposed.Since":                         {heldVerdict},
	"AgentNews":                              {heldVerdict},
}
