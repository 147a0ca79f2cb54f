package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c with reg, in place of a Collector registered before: a process sets up one hub,
// but tests set up several in turn.
func Register(reg prometheus.Registerer, c *Collector) error {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		reg.Unregister(already.ExistingCollector)
		err = reg.Register(c)
	}
	return err
}

// Examples returns collectors of every metric the hub exports, each holding at least one series with
// labels from the known sets (objects named "example"), for the checks of names, help and labels. They
// are built from the same definitions as the hub's own, and registered nowhere.
func Examples() []prometheus.Collector {
	e := newEvents()
	e.dispatchLatency.WithLabelValues(Steps[0]).Observe(1)
	e.clusterNominations.WithLabelValues("example").Inc()
	e.clusterWinners.WithLabelValues("example").Inc()
	e.rejections.WithLabelValues("example", RejectionReasons[0]).Inc()
	e.withdrawals.WithLabelValues("example", WithdrawalReasons[0]).Inc()
	e.evictions.WithLabelValues("example", EvictionReasons[0]).Inc()
	e.finished.WithLabelValues(FinishReasons[0]).Inc()
	e.apiWrites.WithLabelValues(TargetWorker, "example", Verbs[0], WriteResources[0], "201").Inc()
	return append(e.collectors(), NewCollector(ExampleSource()))
}
