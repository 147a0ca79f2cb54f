package metricstest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// labels are the only labels Gantry's metrics may carry. Each names an object an operator made, whose
// number the operator bounds, or takes its values from a known set (anything else is counted as
// Other). A label naming a job, a workload, a namespace or a pod would make a series per job.
var labels = map[string]string{
	"cluster":      "a WorkerCluster",
	"global_queue": "a GlobalQueue",
	"resource":     "a resource of a quota, or of the known set the hub writes",
	"product":      "a GPU product a worker reports, at most metrics.MaxGPUProducts per cluster",
	"reason":       "a known set of condition reasons",
	"state":        "pending, admitted, finished",
	"step":         "the steps of a dispatch",
	"target":       "hub or worker",
	"verb":         "create, update, patch, delete",
	"code":         "an HTTP status code, or error",
	"policy":       "Wait or Fence",
	"result":       "Admitted or a reason of the agent",
	"outcome":      "admitted, waiting, rejected, released",
	// gantry_hub_queue_workloads's, exported only when the operator opts in (--metrics-per-queue).
	"namespace": "a namespace with a Queue",
	"queue":     "a Queue, as many as the tenants make",
	// gantry_build_info's, one value each per process.
	"program":   "gantry-hub or gantry-agent",
	"version":   "the program's version",
	"commit":    "the commit it was built from",
	"goversion": "the Go version it was built with",
}

func TestPromlintFindsNoProblem(t *testing.T) {
	mfs, err := Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) == 0 {
		t.Fatal("no metric gathered")
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestLabelsAreBounded(t *testing.T) {
	mfs, err := Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if len(mf.GetHelp()) == 0 {
			t.Errorf("%s has no help", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if _, ok := labels[l.GetName()]; !ok {
					t.Errorf("%s has label %s, which is not one of the bounded labels", mf.GetName(), l.GetName())
				}
			}
		}
	}
}

// Every metric of Gantry's that the programs register is one the checks above see.
func TestEveryRegisteredMetricIsChecked(t *testing.T) {
	mfs, err := Gather()
	if err != nil {
		t.Fatal(err)
	}
	checked := Names(mfs)
	registered, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range HasPrefix(registered, Prefix) {
		if !slices.Contains(checked, mf.GetName()) && !slices.Contains(checked, mf.GetName()+"_count") {
			t.Errorf("%s is registered but not among the examples", mf.GetName())
		}
	}
}
