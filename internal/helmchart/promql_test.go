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

	"github.com/VictoriaMetrics/metricsql"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gantry-dev/gantry/test/metricstest"
)

// rangeArg is, for each PromQL function, the position of its range-vector argument, or -1 when it
// takes none. A function missing here is not PromQL (the parser also knows MetricsQL's).
var rangeArg = map[string]int{
	"abs": -1, "absent": -1, "ceil": -1, "clamp": -1, "clamp_max": -1, "clamp_min": -1, "day_of_month": -1,
	"day_of_week": -1, "day_of_year": -1, "days_in_month": -1, "exp": -1, "floor": -1, "histogram_quantile": -1,
	"hour": -1, "label_join": -1, "label_replace": -1, "ln": -1, "log10": -1, "log2": -1, "minute": -1, "month": -1,
	"round": -1, "scalar": -1, "sgn": -1, "sort": -1, "sort_desc": -1, "sqrt": -1, "time": -1, "timestamp": -1,
	"vector": -1, "year": -1,
	"absent_over_time": 0, "avg_over_time": 0, "changes": 0, "count_over_time": 0, "delta": 0, "deriv": 0,
	"idelta": 0, "increase": 0, "irate": 0, "last_over_time": 0, "max_over_time": 0, "min_over_time": 0,
	"predict_linear": 0, "present_over_time": 0, "rate": 0, "resets": 0, "stddev_over_time": 0,
	"stdvar_over_time": 0, "sum_over_time": 0, "quantile_over_time": 1,
}

var (
	aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}
	binaryOps    = []string{"+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<=", "and", "or", "unless", "atan2"}
	// grafanaRanges stand for the range variables Grafana fills in before it sends a query.
	grafanaRanges = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
)

// metricNames parses a PromQL expression and returns the metric names it selects. The parser reads
// MetricsQL, a superset of PromQL; what PromQL refuses is refused here too: functions and operators it
// lacks, a range vector where it wants an instant vector or the other way round, vector matching with a
// number, a selector without a metric name.
func metricNames(expr string) ([]string, error) {
	e, err := metricsql.Parse(grafanaRanges.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	if err := walk(e, false, &names); err != nil {
		return nil, err
	}
	return names, nil
}

func walk(e metricsql.Expr, wantRange bool, names *[]string) error {
	if r, ok := e.(*metricsql.RollupExpr); ok && r.Window == nil && !r.ForSubquery() {
		e = r.Expr // an offset or @ only
	}
	r, isRange := e.(*metricsql.RollupExpr)
	switch {
	case wantRange && !isRange:
		return fmt.Errorf("%s: a range vector is wanted here", e.AppendString(nil))
	case isRange && !wantRange:
		return fmt.Errorf("%s: an instant vector is wanted here", e.AppendString(nil))
	}
	switch x := e.(type) {
	case *metricsql.RollupExpr:
		return walk(r.Expr, false, names)
	case *metricsql.MetricExpr:
		return selectorName(x, names)
	case *metricsql.NumberExpr, *metricsql.StringExpr:
		return nil
	case *metricsql.FuncExpr:
		at, ok := rangeArg[x.Name]
		if !ok || x.KeepMetricNames {
			return fmt.Errorf("%s is not a PromQL function", x.Name)
		}
		for i, a := range x.Args {
			if err := walk(a, i == at, names); err != nil {
				return err
			}
		}
		return nil
	case *metricsql.AggrFuncExpr:
		if !slices.Contains(aggregations, x.Name) || x.Limit > 0 {
			return fmt.Errorf("%s is not a PromQL aggregation", x.Name)
		}
		for _, a := range x.Args {
			if err := walk(a, false, names); err != nil {
				return err
			}
		}
		return nil
	case *metricsql.BinaryOpExpr:
		return binary(x, names)
	}
	return fmt.Errorf("%s: %T is not PromQL", e.AppendString(nil), e)
}

func binary(x *metricsql.BinaryOpExpr, names *[]string) error {
	if !slices.Contains(binaryOps, strings.ToLower(x.Op)) || x.KeepMetricNames || x.FillLeft != nil || x.FillRight != nil {
		return fmt.Errorf("%s is not a PromQL operation", x.AppendString(nil))
	}
	_, leftNumber := x.Left.(*metricsql.NumberExpr)
	_, rightNumber := x.Right.(*metricsql.NumberExpr)
	if (x.GroupModifier.Op != "" || x.JoinModifier.Op != "") && (leftNumber || rightNumber) {
		return fmt.Errorf("%s: vector matching with a number", x.AppendString(nil))
	}
	if err := walk(x.Left, false, names); err != nil {
		return err
	}
	return walk(x.Right, false, names)
}

func selectorName(m *metricsql.MetricExpr, names *[]string) error {
	if len(m.LabelFilterss) != 1 {
		return fmt.Errorf("%s: one selector of one metric name wanted", m.AppendString(nil))
	}
	for _, f := range m.LabelFilterss[0] {
		if f.Label == "__name__" && !f.IsRegexp && !f.IsNegative {
			*names = append(*names, f.Value)
			return nil
		}
	}
	return fmt.Errorf("%s selects no metric by name", m.AppendString(nil))
}

func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket{job="x"}[10m]))) > 5`:                        {"a_bucket"},
		`sum by (cluster) (rate(b_total{cluster=~"$cluster"}[$__rate_interval]))`:                         {"b_total"},
		`a > on (cluster) (0.5 * max by (cluster) (b{policy="Fence"}))`:                                   {"a", "b"},
		`max by (c, r) (a) == 0 and on (c) max by (c) (b) == 1`:                                           {"a", "b"},
		`time() - max by (cluster) (ts)`:                                                                  {"ts"},
		`absent(up{job="gantry-hub-metrics"} == 1)`:                                                       {"up"},
		`quantile_over_time(0.9, a[5m]) offset 1h`:                                                        {"a"},
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
		`rate(a[5m]`,                           // syntax
		`rate(a)`,                              // an instant vector where a range is wanted
		`sum(a[5m])`,                           // a range where an instant vector is wanted
		`a > 0.5 * ignoring (p) b`,             // vector matching with a number
		`rollup_rate(a[5m])`,                   // MetricsQL only
		`sum(a) by (c) limit 3`,                // MetricsQL only
		`a default 0`,                          // MetricsQL only
		`{job="x"}`,                            // no metric name
		`{__name__=~"gantry_.*"}`,              // no metric name to check
		`rate(a[$__unknown_grafana_variable])`, // a range Grafana would not fill in
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
