package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// admissionsTotal counts the Admitted conditions the agent wrote, by result: "Admitted" or the reason
	// a copy was not admitted.
	admissionsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gantry_agent_admissions_total",
		Help: "Admitted conditions written to workload copies, by result (Admitted or the reason it was not).",
	}, []string{"result"})

	// passDuration is how long one admission pass took: reading the caches, deciding and writing.
	passDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gantry_agent_admission_pass_duration_seconds",
		Help:    "Duration of one admission pass: snapshot, decisions and writes.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
)

func init() {
	crmetrics.Registry.MustRegister(admissionsTotal, passDuration)
}
