// Package metricstest gathers every metric Gantry's programs export, each with one series of example
// labels, for the tests that check their names, help and labels and the queries that use them (the
// chart's alerts and dashboard).
package metricstest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	agentcontroller "github.com/gantry-dev/gantry/agent/controller"
	hubmetrics "github.com/gantry-dev/gantry/hub/metrics"
	"github.com/gantry-dev/gantry/internal/version"
)

// Prefix starts the name of every metric Gantry defines; the others come from the libraries.
const Prefix = "gantry_"

// Gather returns the metric families of the hub and the agent, built from the programs' own
// definitions.
func Gather() ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range append(append(hubmetrics.Examples(), agentcontroller.MetricExamples()...), version.BuildInfo("gantry-hub")) {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering %v: %w", c, err)
		}
	}
	return reg.Gather()
}

// Names lists the series names a query may use for the families: a histogram's _bucket, _sum and _count.
func Names(mfs []*dto.MetricFamily) []string {
	var out []string
	for _, mf := range mfs {
		n := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			out = append(out, n+"_bucket", n+"_sum", n+"_count")
		case dto.MetricType_SUMMARY:
			out = append(out, n, n+"_sum", n+"_count")
		default:
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// HasPrefix keeps the families whose names start with prefix.
func HasPrefix(mfs []*dto.MetricFamily, prefix string) []*dto.MetricFamily {
	var out []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), prefix) {
			out = append(out, mf)
		}
	}
	return out
}
