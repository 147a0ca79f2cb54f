// Package metrics holds the hub's Prometheus metrics: the events the hub's controllers count where
// they decide them (counters, histograms), and a Collector that computes the fleet's state from the
// hub's caches at scrape time. Every label takes its values from a known set, or names an object an
// operator made (a GlobalQueue, a WorkerCluster, a resource of a quota, a GPU product): no series is
// per workload or per job, so a scrape costs the same for ten jobs as for ten thousand.
package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// Other stands for a label value outside its known set, so that no label takes unbounded values.
const Other = "Other"

// Steps of the dispatch latency histogram.
const (
	StepCreatedToNominated  = "created_to_nominated"
	StepNominatedToWinner   = "nominated_to_winner"
	StepWinnerToJobCreated  = "winner_to_job_created"
	StepCreatedToJobCreated = "created_to_job_created"
)

// Reasons of withdrawals: why the hub deleted a copy from a worker.
const (
	// WithdrawnLost: another cluster won the workload.
	WithdrawnLost = "Lost"
	// WithdrawnStaleEpoch: the copy belongs to an earlier dispatch epoch.
	WithdrawnStaleEpoch = "StaleEpoch"
	// WithdrawnNotNominated: the cluster is no longer nominated (the nomination was given up).
	WithdrawnNotNominated = "NotNominated"
	// WithdrawnDeleted: the hub Workload is being deleted.
	WithdrawnDeleted = "Deleted"
	// WithdrawnLeftover: the copy was left by an earlier Workload of the same name.
	WithdrawnLeftover = "Leftover"
	// WithdrawnOrphan: the copy's hub Workload no longer exists.
	WithdrawnOrphan = "Orphan"
)

// Targets of API writes.
const (
	TargetHub    = "hub"
	TargetWorker = "worker"
)

// The known values of each bounded label; anything else is counted as Other.
var (
	Steps             = []string{StepCreatedToNominated, StepNominatedToWinner, StepWinnerToJobCreated, StepCreatedToJobCreated}
	RejectionReasons  = []string{gantry.ReasonNeverFits, gantry.ReasonNoEligibleNode, gantry.ReasonJobNameConflict}
	EvictionReasons   = []string{gantry.ReasonPlacementTimeout, gantry.ReasonWorkerLost, gantry.ReasonRemoteJobRefused, gantry.ReasonPreempted, gantry.ReasonStopped}
	WithdrawalReasons = []string{WithdrawnLost, WithdrawnStaleEpoch, WithdrawnNotNominated, WithdrawnDeleted, WithdrawnLeftover, WithdrawnOrphan}
	FinishReasons     = []string{gantry.ReasonJobSucceeded, gantry.ReasonJobFailed, gantry.ReasonRemoteJobLost, gantry.ReasonRemoteJobConflict, gantry.ReasonInadmissible}
	Targets           = []string{TargetHub, TargetWorker}
	Reaches           = []string{dispatch.ReachCandidates, dispatch.ReachAlone, dispatch.ReachWidened}
	Verbs             = []string{"create", "update", "patch", "delete"}
	// WriteResources are the resources (and subresources) Gantry's hub writes, on the hub and on workers.
	WriteResources = []string{"workloads", "workloads/status", "jobs", "jobs/status", "namespaces", "leases", "events",
		"globalqueues/status", "queues/status", "cohorts/status", "workerclusters/status"}
)

// Bounded returns v when it is one of known, else Other.
func Bounded(known []string, v string) string {
	if slices.Contains(known, v) {
		return v
	}
	return Other
}

// events are the hub's counters and histograms. They are made by newEvents so that the checks of names
// and labels can build a fresh set with the same definitions.
type events struct {
	passDuration       prometheus.Histogram
	writesQueued       prometheus.Gauge
	passesUncut        prometheus.Counter
	nominations        *prometheus.CounterVec
	winners            prometheus.Counter
	admissionLatency   prometheus.Histogram
	dispatchLatency    *prometheus.HistogramVec
	clusterNominations *prometheus.CounterVec
	clusterWinners     *prometheus.CounterVec
	rejections         *prometheus.CounterVec
	withdrawals        *prometheus.CounterVec
	evictions          *prometheus.CounterVec
	finished           *prometheus.CounterVec
	apiWrites          *prometheus.CounterVec
}

func newEvents() *events {
	return &events{
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_hub_dispatch_pass_duration_seconds",
			Help:    "Time of one dispatch pass: snapshot, plan and handing its writes to the writers (a pass does not wait for them).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		writesQueued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_hub_dispatch_writes_queued",
			Help: "Workload status writes and reads the dispatcher decided on that wait for a free writer.",
		}),
		passesUncut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_hub_dispatch_passes_uncut_total",
			Help: "Dispatch passes planned again with the waiting workloads they had left out of a deep queue, as the quota left might hold some.",
		}),
		nominations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_nominations_total",
			Help: "Nominations persisted: each sends copies of a workload to its candidate clusters. By reach: Candidates (up to the queue's maxCandidates), " +
				"Alone (one cluster, whose capacity report left room for it), Widened (more clusters, as every copy it had waited).",
		}, []string{"reach"}),
		winners: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gantry_hub_winners_total",
			Help: "Winners recorded: workloads admitted by exactly one cluster.",
		}),
		admissionLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_hub_admission_latency_seconds",
			Help:    "Time from Workload creation to its winner being recorded.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}),
		dispatchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gantry_hub_dispatch_latency_seconds",
			Help: "Time of each step of a workload's dispatch: created_to_nominated (first nomination), nominated_to_winner, " +
				"winner_to_job_created (the Job created on the winner), created_to_job_created (end to end).",
			// Up to about three hours: a workload may wait that long for quota.
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 21),
		}, []string{"step"}),
		clusterNominations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_cluster_nominations_total",
			Help: "Copies of workloads asked of each cluster: one per cluster of each nomination persisted.",
		}, []string{"cluster"}),
		clusterWinners: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_cluster_winners_total",
			Help: "Winners recorded, by the cluster that won.",
		}, []string{"cluster"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_rejections_total",
			Help: "Rejections recorded: a cluster's agent said it cannot run a workload as the cluster is, by its reason.",
		}, []string{"cluster", "reason"}),
		withdrawals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_withdrawals_total",
			Help: "Copies the hub deleted from a worker, by why.",
		}, []string{"cluster", "reason"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_evictions_total",
			Help: "Evictions recorded: a winner gave a workload up (PlacementTimeout), was lost (WorkerLost) or refused its job (RemoteJobRefused), or the hub preempted it (Preempted); it is dispatched again.",
		}, []string{"cluster", "reason"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_workloads_finished_total",
			Help: "Workloads recorded as finished, by reason.",
		}, []string{"reason"}),
		apiWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_hub_api_writes_total",
			Help: "Mutating requests the hub sent, by target (hub or worker), worker cluster, verb, resource and HTTP status code.",
		}, []string{"target", "cluster", "verb", "resource", "code"}),
	}
}

func (e *events) collectors() []prometheus.Collector {
	return []prometheus.Collector{e.passDuration, e.writesQueued, e.passesUncut, e.nominations, e.winners, e.admissionLatency, e.dispatchLatency,
		e.clusterNominations, e.clusterWinners, e.rejections, e.withdrawals, e.evictions, e.finished, e.apiWrites}
}

// ev is the hub's one set of events, registered with controller-runtime's registry, which the metrics
// endpoint serves.
var ev = newEvents()

func init() {
	crmetrics.Registry.MustRegister(ev.collectors()...)
}

// DispatchPass records the duration of one dispatch pass.
func DispatchPass(d time.Duration) { ev.passDuration.Observe(d.Seconds()) }

// WritesQueued records how many of the dispatcher's writes and reads wait for a free writer.
func WritesQueued(n int) { ev.writesQueued.Set(float64(n)) }

// PassUncut records a dispatch pass planned again with a queue's tail it had cut.
func PassUncut() { ev.passesUncut.Inc() }

// Nominated records a nomination persisted, with how far it reaches and the clusters it asks.
func Nominated(reach string, clusters []string) {
	ev.nominations.WithLabelValues(Bounded(Reaches, reach)).Inc()
	for _, c := range clusters {
		ev.clusterNominations.WithLabelValues(c).Inc()
	}
}

// Won records a winner persisted at, and the time since the Workload was created (when known).
func Won(cluster string, created, at time.Time) {
	ev.winners.Inc()
	ev.clusterWinners.WithLabelValues(cluster).Inc()
	if !created.IsZero() {
		ev.admissionLatency.Observe(at.Sub(created).Seconds())
	}
}

// Step records the time one step of a dispatch took.
func Step(step string, d time.Duration) {
	ev.dispatchLatency.WithLabelValues(Bounded(Steps, step)).Observe(d.Seconds())
}

// Rejected records a rejection persisted.
func Rejected(cluster, reason string) {
	ev.rejections.WithLabelValues(cluster, Bounded(RejectionReasons, reason)).Inc()
}

// Withdrawn records a copy deleted from a worker.
func Withdrawn(cluster, reason string) {
	ev.withdrawals.WithLabelValues(cluster, Bounded(WithdrawalReasons, reason)).Inc()
}

// Evicted records an eviction persisted.
func Evicted(cluster, reason string) {
	ev.evictions.WithLabelValues(cluster, Bounded(EvictionReasons, reason)).Inc()
}

// Finished records a Workload's finish persisted.
func Finished(reason string) {
	ev.finished.WithLabelValues(Bounded(FinishReasons, reason)).Inc()
}

// APIWrite records a mutating request sent; cluster is empty for the hub's own API server.
func APIWrite(target, cluster, verb, resource, code string) {
	ev.apiWrites.WithLabelValues(Bounded(Targets, target), cluster, Bounded(Verbs, verb), Bounded(WriteResources, resource), code).Inc()
}
