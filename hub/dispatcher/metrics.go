package dispatcher

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	passDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gantry_hub_dispatch_pass_duration_seconds",
		Help:    "Time of one dispatch pass: snapshot, plan and status writes.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	nominations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gantry_hub_nominations_total",
		Help: "Nominations persisted: each sends copies of a workload to its candidate clusters.",
	})
	winners = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gantry_hub_winners_total",
		Help: "Winners recorded: workloads admitted by exactly one cluster.",
	})
	admissionLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "gantry_hub_admission_latency_seconds",
		Help:    "Time from Workload creation to its winner being recorded.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
)

func init() {
	metrics.Registry.MustRegister(passDuration, nominations, winners, admissionLatency)
}
