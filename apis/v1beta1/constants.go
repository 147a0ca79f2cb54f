package v1beta1

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations. These names are part of Gantry's contract with users and scripts.
const (
	// QueueLabel on a batch Job selects the namespaced Queue it is submitted to.
	QueueLabel = "gantry.dev/queue-name"
	// JobNameLabel on a hub Workload names the Job it stands for.
	JobNameLabel = "gantry.dev/job-name"
	// WorkerClusterSetLabel on a WorkerCluster names the WorkerClusterSet that made it.
	WorkerClusterSetLabel = "gantry.dev/worker-cluster-set"
	// CordonedBySetAnnotation on a WorkerCluster says its set cordoned it as it left the selection, so
	// that the set uncordons it should it be selected again (and never one an operator cordoned).
	CordonedBySetAnnotation = "gantry.dev/cordoned-by-set"
	// PodSetLabel on the pods of a job Gantry created on a worker names the pod set they belong to.
	PodSetLabel = "gantry.dev/pod-set"
	// PodGroupLabel on the pods of a gang names the PodGroup they join (Admission.PodGroup). The worker's
	// policy gantry-pod-group copies it into spec.schedulingGroup where a job kind's API does not carry
	// that field down to its pods.
	PodGroupLabel = "gantry.dev/pod-group"
	// KueueLocalQueueAnnotation on a copy names the LocalQueue of the worker's Kueue that its job goes
	// through (WorkerCluster spec.kueue), so that the agent admits it by that queue's room.
	KueueLocalQueueAnnotation = "gantry.dev/kueue-local-queue"
	// KueueQueueNameLabel is Kueue's label that puts a job into a LocalQueue of its namespace.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// WorkloadUIDLabel on every object Gantry creates on a worker holds the hub Workload's UID. Its presence
	// marks an object as Gantry's own; a worker object without it is never adopted or deleted.
	WorkloadUIDLabel = "gantry.dev/workload-uid"
	// DispatchEpochLabel on every object Gantry creates on a worker holds the dispatch epoch that created it,
	// so that copies from a superseded attempt are recognised and fenced.
	DispatchEpochLabel = "gantry.dev/dispatch-epoch"
	// DispatchLabel on a copy and on a job Gantry creates on a worker (not on what the worker's
	// controllers make from it) names the one dispatch it is for, "<workload UID>.<epoch>": the hub
	// deletes several at once by a selector of their dispatches, which can match nothing else.
	DispatchLabel = "gantry.dev/dispatch"

	// JobManagedBy is the spec.managedBy value that keeps the hub's Job controller away from queued Jobs.
	JobManagedBy = "gantry.dev/hub"

	// WorkloadFinalizer keeps a hub Workload until its objects on workers are withdrawn.
	WorkloadFinalizer = "gantry.dev/remote-cleanup"
	// UsageFinalizer keeps a hub Workload until its namespace's Usage counts its runs.
	UsageFinalizer = "gantry.dev/usage"

	// HubLeaseName is the Lease the hub renews in GantryNamespace on every worker it reaches; under the
	// failover policy Fence its agent stops the hub's Jobs once it is not renewed in time.
	HubLeaseName = "gantry-hub"
	// GantryNamespace holds Gantry's own objects on a worker.
	GantryNamespace = "gantry-system"
	// FailoverPolicyAnnotation on the hub's Lease carries the cluster's failover policy to its agent; the
	// Lease's leaseDurationSeconds carries the timeout.
	FailoverPolicyAnnotation = "gantry.dev/failover-policy"
	// SuspendedByAnnotation on a worker Job says who suspended it: "fence", by the agent, when the hub's
	// lease lapsed. The hub resumes such a Job in place when the cluster is still its winner.
	SuspendedByAnnotation = "gantry.dev/suspended-by"
	// SuspendedByFence is the SuspendedByAnnotation value the agent sets.
	SuspendedByFence = "fence"

	// GPUResource is the extended resource name of NVIDIA GPUs.
	GPUResource = "nvidia.com/gpu"
	// GPUProductsAnnotation on a batch Job lists the GPU products its pods accept, in order of
	// preference, separated by commas: "NVIDIA-H100-80GB-HBM3,NVIDIA-A100-SXM4-80GB".
	GPUProductsAnnotation = "gantry.dev/gpu-products"
	// TopologyKeyAnnotation on a batch Job names a node label key; all its pods must land on nodes
	// sharing one value of it (one zone, one rack).
	TopologyKeyAnnotation = "gantry.dev/topology-key"
	// DataLocationAnnotation on a job says where its data or last checkpoint lives: comma-separated
	// key=value labels of WorkerClusters ("topology.kubernetes.io/region=eu-west"), which the NearData
	// score ranks first.
	DataLocationAnnotation = "gantry.dev/data-location"
	// CheckpointIntervalAnnotation on a job says how often it writes a checkpoint it can resume from (a
	// duration: "30m"): the hub reckons its work since the last one at risk when it chooses whom to
	// preempt and what a run taken back lost.
	CheckpointIntervalAnnotation = "gantry.dev/checkpoint-interval"
	// LastCheckpointAnnotation is written by a running job on its own object on the worker (the Job,
	// JobSet, RayJob or TrainJob Gantry created there), as an RFC 3339 time: when it last wrote a
	// checkpoint it can resume from. The hub records it on the job's run.
	LastCheckpointAnnotation = "gantry.dev/last-checkpoint"
	// AdmissionDeadlineAnnotation on a job sets how long it may wait for a cluster (a duration: "30m",
	// "2h"), over its GlobalQueue's spec.admissionDeadline.
	AdmissionDeadlineAnnotation = "gantry.dev/admission-deadline"
	// StoppedAnnotation on a job, set to "true" by its owner (kubectl gantry stop), stops it: it is not
	// dispatched, and taken back from its cluster if it runs, until the annotation is removed (kubectl
	// gantry resume). The job's Workload records it in spec.stopped.
	StoppedAnnotation = "gantry.dev/stopped"
	// MaxGPUProducts is how many products a job may list.
	MaxGPUProducts = 8
	// MaxDataLocationTerms is how many key=value terms a job's data location may have.
	MaxDataLocationTerms = 8
	// MaxPodSets is how many groups of pods a workload may have (a JobSet's replicated jobs).
	MaxPodSets = 8
	// GPUProductLabel is the node label naming the GPU product a node carries.
	GPUProductLabel = "nvidia.com/gpu.product"
)

// Condition types of a Workload.
const (
	// WorkloadPending is True while the workload waits to be dispatched or admitted; its reason says why.
	WorkloadPending = "Pending"
	// WorkloadDispatched is True once copies were sent to the nominated clusters of the current epoch.
	WorkloadDispatched = "Dispatched"
	// WorkloadAdmitted is True on a hub Workload once a winner is recorded, and on a worker copy once its
	// agent reserved room for the whole gang.
	WorkloadAdmitted = "Admitted"
	// WorkloadFinished is True once the job ended on its cluster (or can never run); quota is released.
	WorkloadFinished = "Finished"
	// WorkloadJobCreated is True once the hub created the Job on the winner, recorded right after the
	// create. A Job that is then missing there was deleted by someone else: it is not created again.
	WorkloadJobCreated = "JobCreated"
	// WorkloadClusterReachable is False while the hub cannot reach a cluster that may run the workload
	// (its winner) or that holds objects the hub must remove; the message names the cluster and since when.
	WorkloadClusterReachable = "ClusterReachable"
	// WorkloadSuspended is True on a worker copy whose Job the agent suspended (reason HubLeaseExpired).
	WorkloadSuspended = "Suspended"
	// WorkloadDeleting is True while a Workload being deleted waits for its objects on workers to be gone.
	WorkloadDeleting = "Deleting"
	// WorkloadStopped is True while the workload's job is stopped by its owner (spec.stopped), and False
	// (reason Resumed) once it waits again after a stop: it began to wait anew then, and its admission
	// deadline counts from then.
	WorkloadStopped = "Stopped"
)

// Reasons of Workload conditions.
const (
	ReasonQueueNotFound        = "QueueNotFound"
	ReasonGlobalQueueNotFound  = "GlobalQueueNotFound"
	ReasonNamespaceNotSelected = "NamespaceNotSelected"
	// ReasonQueueHeld: the Workload's GlobalQueue is held (spec.held): nothing of it is dispatched, and
	// copies sent before are withdrawn, until it is no longer held.
	ReasonQueueHeld = "QueueHeld"
	// ReasonQueueDrained: the Workload's GlobalQueue is held and drained (spec.drainWhileHeld): a
	// Workload without a cluster is finished, and its hub job marked Failed.
	ReasonQueueDrained = "QueueDrained"
	// ReasonStopped: the Workload's job is stopped by its owner (StoppedAnnotation, spec.stopped): it is
	// not dispatched, and was taken back from its cluster if it ran, until it is resumed. As the reason
	// of an eviction: it was taken back from its winner for that.
	ReasonStopped             = "Stopped"
	ReasonWaitingForQuota     = "WaitingForQuota"
	ReasonWaitingForCapacity  = "WaitingForCapacity"
	ReasonNoClusterAvailable  = "NoClusterAvailable"
	ReasonNoClusterCanHold    = "NoClusterCanHold"
	ReasonInvalidJob          = "InvalidJob"
	ReasonWaitingForAdmission = "WaitingForAdmission"
	ReasonNominated           = "Nominated"
	ReasonAdmittedByCluster   = "AdmittedByCluster"
	ReasonJobSucceeded        = "Succeeded"
	ReasonJobFailed           = "Failed"
	ReasonRemoteJobLost       = "RemoteJobLost"
	ReasonRemoteJobConflict   = "RemoteJobConflict"
	ReasonEvicted             = "Evicted"
	ReasonJobCreated          = "Created"
	// ReasonWorkerLost: the winner was fenced (nothing of it runs any more); the job is dispatched again.
	ReasonWorkerLost         = "WorkerLost"
	ReasonClusterUnreachable = "Unreachable"
	ReasonClusterReachable   = "Reachable"
	// ReasonWaitingForWorker: a Workload being deleted waits until its Job on a worker is gone.
	ReasonWaitingForWorker = "WaitingForWorker"
	// ReasonRanBefore: the Workload of a Job that already ran was deleted; the Job is not run again.
	ReasonRanBefore = "RanBefore"
	// ReasonInadmissible: the Workload waited its admission deadline without a cluster to run it; it is
	// finished and its hub job marked Failed.
	ReasonInadmissible = "Inadmissible"
	// ReasonPreempted: the hub took the workload back from its winner to make room for another (its
	// Evictions entry names which); it is dispatched again.
	ReasonPreempted = "Preempted"
	// ReasonPreempting: the workload waits for the workloads it preempted to leave their cluster.
	ReasonPreempting = "Preempting"
	// Why a workload was preempted: a higher priority in its own queue, its queue's cohort taking back
	// what it lent, or a queue of its cohort whose weighted share is smaller.
	ReasonInQueuePriority     = "InQueuePriority"
	ReasonInCohortReclamation = "InCohortReclamation"
	ReasonInCohortFairSharing = "InCohortFairSharing"

	// Reasons an agent gives on a copy's Admitted condition.
	ReasonFits                  = "Fits"
	ReasonInsufficientResources = "InsufficientResources"
	ReasonNoEligibleNode        = "NoEligibleNode"
	ReasonNeverFits             = "NeverFits"
	ReasonJobNameConflict       = "JobNameConflict"
	// ReasonKindNotServed: the cluster does not serve the API of the job's kind (a JobSet where no
	// JobSet CRD is installed).
	ReasonKindNotServed = "KindNotServed"
	// ReasonClassNotFound: a pod set names a PriorityClass or RuntimeClass this cluster does not have,
	// so its API server would refuse the pods; the rejection lapses, and the cluster is asked again
	// later, should the class be created meanwhile.
	ReasonClassNotFound = "ClassNotFound"
	// ReasonNamespaceQuotaTooSmall: a ResourceQuota of the copy's namespace on this cluster allows less
	// than the job needs, even with nothing else there; the rejection lapses, as ClassNotFound's.
	ReasonNamespaceQuotaTooSmall = "NamespaceQuotaTooSmall"
	// ReasonKueueQuotaTooSmall: the ClusterQueue of the worker's Kueue that the copy's LocalQueue feeds
	// could never hold the job, even with nothing else admitted and all it may borrow; or the worker
	// runs no Kueue though its WorkerCluster says so. The rejection lapses, as ClassNotFound's.
	ReasonKueueQuotaTooSmall = "KueueQuotaTooSmall"
	// ReasonKueueQueueFull: that ClusterQueue has no room for the job now, by Kueue's accounting, or
	// the LocalQueue cannot take it now (missing, stopped, inactive); the copy waits.
	ReasonKueueQueueFull = "KueueQueueFull"
	// ReasonHubLeaseExpired: the hub's lease on the cluster lapsed under the failover policy Fence; the
	// agent suspended the copy's Job (its pods are deleted) until the hub resumes it or removes it.
	ReasonHubLeaseExpired = "HubLeaseExpired"
	// ReasonResumed: what held the workload ended. On a copy (Suspended=False): the hub renewed its lease
	// and resumed the Job the agent had suspended. On the hub (Stopped=False): its owner resumed it.
	ReasonResumed = "Resumed"
	// ReasonPreviousJobPresent: a Job Gantry created for an earlier Workload of the same name is still in
	// the cluster; the hub removes it, and the copy is decided again once it is gone.
	ReasonPreviousJobPresent = "PreviousJobPresent"
	// ReasonHeldForStarvingGang: the copy would fit, but only on nodes held for a larger workload that
	// has waited past the agent's starvation timeout; it waits.
	ReasonHeldForStarvingGang = "HeldForStarvingGang"
	// ReasonPodGroupNotCreated: an agent could not make the PodGroup of a gang it admitted (an Event on
	// the copy); its pods wait for it, and the agent makes it again.
	ReasonPodGroupNotCreated = "PodGroupNotCreated"
	// ReasonPlacementTimeout: the copy's Job was created, but not all its pods were placed on nodes
	// within the agent's placement timeout; the agent gave it up and the hub dispatches it again.
	ReasonPlacementTimeout = "PlacementTimeout"
	// ReasonRemoteJobRefused: the winner's API server refused the job Gantry created for the copy as
	// invalid there (its controller's webhook, a policy of the cluster): nothing of it runs there, and
	// the hub dispatches it again.
	ReasonRemoteJobRefused = "RemoteJobRefused"
	// ReasonWorkerRefusing (JobCreated=False): the winner's API server does not take the job Gantry
	// creates there yet (a ResourceQuota, a LimitRange, a policy, RBAC, a namespace it may not create):
	// the hub tries again, and takes the Workload back as RemoteJobRefused when it has not taken it
	// within a bounded time.
	ReasonWorkerRefusing = "WorkerRefusing"
	// ReasonJobChanged: the job's spec changed after a winner was chosen and before its Job was created
	// there; nothing was created from the changed spec, and the hub takes the Workload back so that it is
	// made anew from the job as it is now.
	ReasonJobChanged = "JobChanged"
	// ReasonReservationExpired: the agent admitted the copy, but the hub created no Job for it within
	// the agent's reservation TTL; the room is released, and the copy waits for a new dispatch epoch.
	ReasonReservationExpired = "ReservationExpired"
)

// Condition types and reasons of a WorkerCluster.
const (
	// ClusterConnected is True while the hub holds a working connection to the cluster.
	ClusterConnected = "Connected"
	// ClusterAgentReady is True while the cluster's agent publishes fresh capacity reports.
	ClusterAgentReady = "AgentReady"
	// ClusterGangScheduling, on a CapacityReport and, as its agent reports it, on the WorkerCluster, is
	// True when the cluster serves the PodGroup API (scheduling.k8s.io/v1beta1): its kube-scheduler can
	// bind a gang's pods all or none.
	ClusterGangScheduling = "GangScheduling"
	// ReasonPodGroupsServed and ReasonNoPodGroupAPI are ClusterGangScheduling's reasons.
	ReasonPodGroupsServed = "PodGroupsServed"
	ReasonNoPodGroupAPI   = "NoPodGroupAPI"
	// ClusterKueue, on a CapacityReport and, as its agent reports it, on the WorkerCluster, is True when
	// the cluster serves Kueue's API (kueue.x-k8s.io/v1beta2), which spec.kueue needs.
	ClusterKueue = "Kueue"
	// ReasonKueueServed and ReasonNoKueueAPI are ClusterKueue's reasons.
	ReasonKueueServed = "KueueServed"
	ReasonNoKueueAPI  = "NoKueueAPI"

	ReasonConnected          = "Connected"
	ReasonSecretNotFound     = "SecretNotFound"
	ReasonInvalidKubeconfig  = "InvalidKubeconfig"
	ReasonInsecureKubeconfig = "InsecureKubeconfig"
	ReasonUnreachable        = "Unreachable"
	ReasonMissingAPI         = "MissingAPI"
	// ReasonUnauthorized: the worker refuses the hub's token (401), or the hub's identity there lacks
	// rights of deploy/worker/hub-access.yaml (403). The cluster counts as unreachable until a rotated
	// Secret or restored rights let the hub in again.
	ReasonUnauthorized = "Unauthorized"
	// ReasonDuplicateCluster: the kubeconfig reaches a cluster that another WorkerCluster already
	// registers (the same kube-system namespace UID). One cluster under two names would hold two
	// copies of each job and count its quota twice.
	ReasonDuplicateCluster = "DuplicateCluster"
	ReasonAgentReporting   = "AgentReporting"

	// Reasons of a WorkerCluster registered through a ClusterProfile.
	// ReasonClusterProfileNotFound: no such ClusterProfile in the hub's namespace, or the hub does not
	// serve the ClusterProfile API.
	ReasonClusterProfileNotFound = "ClusterProfileNotFound"
	// ReasonNoAccessProvider: none of the profile's access providers is named in the hub's provider
	// file, or the hub was started without one.
	ReasonNoAccessProvider = "NoAccessProvider"
	// ReasonCredentialPluginFailed: the provider's credential plugin did not give the hub a credential.
	ReasonCredentialPluginFailed = "CredentialPluginFailed"
	// ReasonClusterUnhealthy: the profile says the cluster's control plane is not healthy
	// (ControlPlaneHealthy=False); the hub sends it nothing until it is.
	ReasonClusterUnhealthy = "ClusterUnhealthy"
	// ReasonInvalidClusterProfile: the profile's access data cannot be used (an address no worker can
	// be at, http, a proxy, extension data the provider's policy cannot apply).
	ReasonInvalidClusterProfile = "InvalidClusterProfile"

	// ClusterLeastPrivilege says whether the hub holds more rights on the cluster than
	// deploy/worker/hub-access.yaml grants. It is a warning; the cluster is used either way.
	ClusterLeastPrivilege = "LeastPrivilege"
	ReasonAllowlistOnly   = "AllowlistOnly"
	ReasonExcessRights    = "ExcessRights"
	// ReasonRightsUnknown: the hub could not review its rights on the cluster.
	ReasonRightsUnknown    = "RightsUnknown"
	ReasonNoCapacityReport = "NoCapacityReport"
	ReasonReportStale      = "ReportStale"

	// ClusterAgentVersionSupported says whether the version of the cluster's agent and the hub's are
	// within the version-skew policy (the agent's minor release is the hub's, the one before or the one
	// after). It is a warning for an upgrade under way; the cluster is used either way.
	ClusterAgentVersionSupported = "AgentVersionSupported"
	ReasonWithinSkewPolicy       = "WithinSkewPolicy"
	ReasonOutsideSkewPolicy      = "OutsideSkewPolicy"
	// ReasonVersionUnknown: the hub or the agent is not a release (a development build), or the agent
	// is from before agents reported their version.
	ReasonVersionUnknown = "VersionUnknown"
)

// Condition type and reasons of a WorkerClusterSet.
const (
	// SetSynced is True while the set could read its selection.
	SetSynced      = "Synced"
	ReasonSelected = "Selected"
	// ReasonSelectionAPINotServed: the hub does not serve ClusterProfiles, or OCM's PlacementDecisions.
	ReasonSelectionAPINotServed = "SelectionAPINotServed"
	// ReasonInvalidSelector: the label selector cannot be used.
	ReasonInvalidSelector = "InvalidSelector"
)

// Condition types and reasons of queues.
const (
	// QueueActive is True when a queue can take workloads.
	QueueActive = "Active"

	ReasonReady          = "Ready"
	ReasonUnknownCluster = "UnknownCluster"
)

// RejectsCluster says whether an agent's reason on a copy's Admitted condition means its cluster cannot
// run the workload as the cluster is: no node could ever hold a pod, no node is eligible at all, or a Job
// Gantry did not create holds the name. The hub does not nominate that cluster for the workload again,
// and the agent does not decide the copy again.
func RejectsCluster(reason string) bool {
	switch reason {
	case ReasonNeverFits, ReasonNoEligibleNode, ReasonJobNameConflict, ReasonKindNotServed, ReasonClassNotFound, ReasonNamespaceQuotaTooSmall,
		ReasonKueueQuotaTooSmall:
		return true
	}
	return false
}

// Dispatch is the value of DispatchLabel for a workload's dispatch epoch.
func Dispatch(workloadUID types.UID, epoch int64) string {
	return string(workloadUID) + "." + strconv.FormatInt(epoch, 10)
}
