package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gantry-dev/gantry/test/metricstest"
)

// grafanaRanges stand for the range variables Grafana fills in before it sends a query.
var grafanaRanges = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// promql is Prometheus's own parser, with its default (stable) functions: what it refuses, Prometheus
// refuses.
var promql = parser.NewParser(parser.Options{})

// metricNames parses a PromQL expression as Prometheus does (syntax, functions, and the types it
// checks: a range vector where an instant one is wanted or the other way round, vector matching with a
// number) and returns the metric names it selects; a selector must name its metric.
func metricNames(expr string) ([]string, error) {
	e, err := promql.ParseExpr(grafanaRanges.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	var walkErr error
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || walkErr != nil {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == "__name__" && m.Type == labels.MatchEqual {
				names = append(names, m.Value)
				return nil
			}
		}
		walkErr = fmt.Errorf("%s selects no metric by name", vs)
		return nil
	})
	return names, walkErr
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="x"}[10m]))) > 5`:                        {"a_bucket"},
		`sum by (cluster) (rate(b_total{cluster=~"$cluster"}[$__rate_interval]))`:                         {"b_total"},
		`a > on (cluster) (0.5 * max by (cluster) (b{policy="Fence"}))`:                                   {"a", "b"},
		`max by (c, r) (a) == 0 and on (c) max by (c) (b) == 1`:                                           {"a", "b"},
		`time() - max by (cluster) (ts)`:                                                                  {"ts"},
		`absent(up{job="gantry-hub-metrics"} == 1)`:                                                       {"up"},
		`quantile_over_time(0.9, a[5m] offset 1h)`:                                                        {"a"},
		`{__name__="a", job="x"}`:                                                                         {"a"},
		`max_over_time(rate(a_total[5m])[1h:1m])`:                                                         {"a_total"},
		`sum(rate(a_sum[5m])) / sum(rate(a_count[5m]))`:                                                   {"a_sum", "a_count"},
		`max by (global_queue, cluster, resource) (u) / max by (global_queue, cluster, resource) (q > 0)`: {"u", "q"},
	} {
		got, err := metricNames(expr)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("metricNames(%s) = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, expr := range []string{
		`rate(a[5m]`,                               // syntax
		`rate(a)`,                                  // an instant vector where a range is wanted
		`sum(a[5m])`,                               // a range where an instant vector is wanted
		`a > 0.5 * ignoring (p) b`,                 // vector matching with a number
		`rollup_rate(a[5m])`,                       // MetricsQL only
		`sum(a) by (c) limit 3`,                    // MetricsQL only
		`a default 0`,                              // MetricsQL only
		`{job="x"}`,                                // no metric name
		`{__name__=~"gantry_.*"}`,                  // no metric name to check
		`rate(a[$__unknown_grafana_variable])`,     // a range Grafana would not fill in
		`quantile_over_time(0.9, a[5m]) offset 1h`, // an offset on a function (MetricsQL took it)
	} {
		if names, err := metricNames(expr); err == nil {
			t.Errorf("metricNames(%s) = %v, want an error", expr, names)
		}
	}
}

// fromLibraries are the series the rules and the dashboard may use that Gantry does not define:
// Prometheus's own, and controller-runtime's leader election.
var fromLibraries = []string{"up", "leader_election_master_status"}

// exported lists every series name Gantry's programs export, from the registry the promlint test
// gathers.
func exported(t *testing.T) []string {
	t.Helper()
	mfs, err := metricstest.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return append(metricstest.Names(mfs), fromLibraries...)
}

// Every expression of the chart's alerts parses as PromQL and names only metrics Gantry exports.
func TestRulesUseExportedMetrics(t *testing.T) {
	known := exported(t)
	rules := 0
	for _, u := range render(t, nonDefault) {
		if u.GetKind() != "PrometheusRule" {
			continue
		}
		var pr monitoringv1.PrometheusRule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pr); err != nil {
			t.Fatal(err)
		}
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				rules++
				checkExpr(t, r.Alert, r.Expr.String(), known)
			}
		}
	}
	if rules < 10 {
		t.Errorf("%d rules checked; the chart's alerts are missing", rules)
	}
}

// Every query of the dashboard, its panels' and its variables', parses as PromQL and names only
// metrics Gantry exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	known := exported(t)
	data, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "gantry.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			queries++
			checkExpr(t, p.Title, target.Expr, known)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if v.Type != "query" || !ok {
			continue
		}
		m := labelValues.FindStringSubmatch(fmt.Sprint(q["query"]))
		if m == nil {
			t.Errorf("variable %s: query %v is not label_values(<metric>, <label>)", v.Name, q["query"])
			continue
		}
		queries++
		checkExpr(t, "variable "+v.Name, m[1], known)
	}
	if dash.UID == "" || queries < 20 {
		t.Errorf("dashboard uid %q with %d queries", dash.UID, queries)
	}
}

func checkExpr(t *testing.T, where, expr string, known []string) {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			t.Errorf("%s: %q uses %s, which Gantry does not export", where, expr, n)
		}
	}
}
