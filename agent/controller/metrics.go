package controller

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Outcomes of an Admitted condition the agent wrote, which group its reasons.
const (
	OutcomeAdmitted = "admitted"
	// OutcomeWaiting: the copy may be admitted later (InsufficientResources, HeldForStarvingGang,
	// PreviousJobPresent).
	OutcomeWaiting = "waiting"
	// OutcomeRejected: the cluster cannot run the copy as it is (NeverFits, NoEligibleNode,
	// JobNameConflict); the hub nominates elsewhere.
	OutcomeRejected = "rejected"
	// OutcomeReleased: an admitted copy gave its room back (ReservationExpired, PlacementTimeout).
	OutcomeReleased = "released"
	// OutcomeOther is a reason outside the known set.
	OutcomeOther = "Other"
)

// The known values of the agent's bounded labels.
var (
	// Results are the values of the result label: Admitted or the reason the copy was not admitted.
	Results = []string{"Admitted", gantryv1beta1.ReasonInsufficientResources, gantryv1beta1.ReasonHeldForStarvingGang,
		gantryv1beta1.ReasonPreviousJobPresent, gantryv1beta1.ReasonKueueQueueFull, gantryv1beta1.ReasonNeverFits,
		gantryv1beta1.ReasonNoEligibleNode, gantryv1beta1.ReasonJobNameConflict, gantryv1beta1.ReasonKindNotServed,
		gantryv1beta1.ReasonClassNotFound, gantryv1beta1.ReasonNamespaceQuotaTooSmall, gantryv1beta1.ReasonKueueQuotaTooSmall,
		gantryv1beta1.ReasonReservationExpired, gantryv1beta1.ReasonPlacementTimeout}
	Outcomes = []string{OutcomeAdmitted, OutcomeWaiting, OutcomeRejected, OutcomeReleased, OutcomeOther}
)

// admissionOutcome groups the reason of an Admitted condition.
func admissionOutcome(reason string) string {
	switch reason {
	case gantryv1beta1.ReasonFits:
		return OutcomeAdmitted
	case gantryv1beta1.ReasonInsufficientResources, gantryv1beta1.ReasonHeldForStarvingGang, gantryv1beta1.ReasonPreviousJobPresent,
		gantryv1beta1.ReasonKueueQueueFull:
		return OutcomeWaiting
	case gantryv1beta1.ReasonReservationExpired, gantryv1beta1.ReasonPlacementTimeout:
		return OutcomeReleased
	}
	if gantryv1beta1.RejectsCluster(reason) {
		return OutcomeRejected
	}
	return OutcomeOther
}

// boundedResult is result when it is one of Results, else Other.
func boundedResult(result string) string {
	if slices.Contains(Results, result) {
		return result
	}
	return OutcomeOther
}

type agentMetrics struct {
	// admissions counts the Admitted conditions the agent wrote, by result ("Admitted" or the reason a
	// copy was not admitted, as before outcome was added) and outcome (the group of that reason).
	admissions *prometheus.CounterVec
	// passDuration is how long one admission pass took: reading the caches, deciding and writing.
	passDuration prometheus.Histogram
	reservations prometheus.Gauge
	placement    prometheus.Histogram
}

func newAgentMetrics() *agentMetrics {
	return &agentMetrics{
		admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_agent_admissions_total",
			Help: "Admitted conditions written to workload copies, by result (Admitted or the reason it was not) and outcome (admitted, waiting, rejected, released).",
		}, []string{"result", "outcome"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_agent_admission_pass_duration_seconds",
			Help:    "Duration of one admission pass: snapshot, decisions and writes.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		reservations: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_agent_reservations",
			Help: "Admitted copies whose room the agent holds because their pods are not all bound yet, at the last pass.",
		}),
		placement: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gantry_agent_placement_duration_seconds",
			Help: "Time from a copy's admission to all its pods bound to nodes: the hub's winner and Job, the Job controller and the scheduler.",
			// Up to about half an hour: the placement timeout is 5 minutes by default.
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 15),
		}),
	}
}

func (m *agentMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.admissions, m.passDuration, m.reservations, m.placement}
}

var agent = newAgentMetrics()

var (
	admissionsTotal = agent.admissions
	passDuration    = agent.passDuration
)

func init() {
	crmetrics.Registry.MustRegister(agent.collectors()...)
}

// recordPlacements records the placements that completed in a pass and the reservations held after it.
func recordPlacements(placed map[types.UID]time.Duration, held int) {
	for _, d := range placed {
		agent.placement.Observe(d.Seconds())
	}
	agent.reservations.Set(float64(held))
}

// MetricExamples returns collectors of every metric the agent exports, each holding at least one series
// with labels from the known sets, for the checks of names, help and labels. They are built from the
// same definitions as the agent's own, and registered nowhere.
func MetricExamples() []prometheus.Collector {
	m := newAgentMetrics()
	m.admissions.WithLabelValues(Results[0], Outcomes[0]).Inc()
	m.placement.Observe(1)
	return m.collectors()
}
