package view

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// UsageReportAPIVersion and UsageReportKind head what kubectl gantry usage prints with -o json or -o
// yaml; they change as ExplanationAPIVersion does: fields may be added within a version.
const (
	UsageReportAPIVersion = "cli.gantry.dev/v1"
	UsageReportKind       = "UsageReport"
)

// A UsageDimension is what kubectl gantry usage --by adds the GPU time up by.
type UsageDimension string

const (
	ByNamespace   UsageDimension = "namespace"
	ByQueue       UsageDimension = "queue"
	ByGlobalQueue UsageDimension = "globalqueue"
	ByCluster     UsageDimension = "cluster"
	ByProduct     UsageDimension = "product"
)

// UsageDimensions are all of them, in the order of the default --by.
var UsageDimensions = []UsageDimension{ByNamespace, ByQueue, ByGlobalQueue, ByCluster, ByProduct}

// ParseUsageBy reads --by: dimensions separated by commas, in the order the rows are sorted and shown,
// each once.
func ParseUsageBy(s string) ([]UsageDimension, error) {
	var by []UsageDimension
	for _, part := range strings.Split(s, ",") {
		d := UsageDimension(strings.ToLower(strings.TrimSpace(part)))
		switch {
		case !slices.Contains(UsageDimensions, d):
			return nil, fmt.Errorf("%q is not a dimension: want some of %s, separated by commas", part, dimensionList())
		case slices.Contains(by, d):
			return nil, fmt.Errorf("%s is named twice", d)
		}
		by = append(by, d)
	}
	return by, nil
}

func dimensionList() string {
	names := make([]string, len(UsageDimensions))
	for i, d := range UsageDimensions {
		names[i] = string(d)
	}
	return strings.Join(names, ", ")
}

// sinceDays is a number of days before the rest of a --since: 7d, 1d12h.
var sinceDays = regexp.MustCompile(`^([0-9]+)d(.*)$`)

// ParseSince reads --since: a Go duration (36h, 90m) or a number of days (7d), or days then a duration
// (1d12h); not negative.
func ParseSince(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration: want one such as 7d, 36h or 90m", s)
	var d time.Duration
	rest := strings.TrimSpace(s)
	if strings.HasPrefix(rest, "-") {
		return 0, fmt.Errorf("%q is negative: want how far back to count from, such as 7d", s)
	}
	if m := sinceDays.FindStringSubmatch(rest); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, bad
		}
		d, rest = time.Duration(n)*24*time.Hour, m[2]
		if rest == "" {
			return d, nil
		}
	}
	more, err := time.ParseDuration(rest)
	switch {
	case err != nil:
		return 0, bad
	case more < 0 || d > math.MaxInt64-more:
		return 0, bad
	}
	return d + more, nil
}

// SinceDay is where a --since of d counts from: the start of the UTC day of now−d.
func SinceDay(now time.Time, d time.Duration) time.Time {
	s := now.Add(-d).UTC()
	return time.Date(s.Year(), s.Month(), s.Day(), 0, 0, 0, 0, time.UTC)
}

// NamespaceUsage is what one namespace used, by Queue, GlobalQueue, cluster and GPU product
// (accounting.Summarize).
type NamespaceUsage struct {
	Namespace string
	Entries   []gantry.UsageEntry
}

// UsageRow is the GPU time of one combination of the --by dimensions; the others are left empty. Cost
// and LostCost are what the priced part of GPUSeconds and LostGPUSeconds cost: empty where none of it
// was priced, LostCost 0 where what was priced was not lost.
type UsageRow struct {
	Namespace          string        `json:"namespace,omitempty"`
	Queue              string        `json:"queue,omitempty"`
	GlobalQueue        string        `json:"globalQueue,omitempty"`
	Cluster            string        `json:"cluster,omitempty"`
	GPUProduct         string        `json:"gpuProduct,omitempty"`
	GPUSeconds         int64         `json:"gpuSeconds"`
	BorrowedGPUSeconds int64         `json:"borrowedGPUSeconds"`
	LostGPUSeconds     int64         `json:"lostGPUSeconds"`
	GPUHours           float64       `json:"gpuHours"`
	Cost               gantry.Amount `json:"cost,omitempty"`
	LostCost           gantry.Amount `json:"lostCost,omitempty"`
}

// UsageReport is what kubectl gantry usage prints with -o json or yaml. docs/cli.md lists its fields.
type UsageReport struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	By         []UsageDimension `json:"by"`
	// Since is the start of the UTC day counted from; unset: all the Usage counts.
	Since *metav1.Time `json:"since,omitempty"`
	// Now is the time runs still running are counted to.
	Now  metav1.Time `json:"now"`
	Rows []UsageRow  `json:"rows"`
	// Unreadable names the kinds the reader may not read ("WorkerClusters"), what they would tell left
	// out.
	Unreadable []string `json:"unreadable,omitempty"`
}

// NewUsageReport adds up the namespaces' usage by the dimensions; since is nil for all of it.
func NewUsageReport(usage []NamespaceUsage, by []UsageDimension, since *time.Time, now time.Time, unreadable []string) UsageReport {
	r := UsageReport{APIVersion: UsageReportAPIVersion, Kind: UsageReportKind, By: by, Now: metav1.NewTime(now.UTC()),
		Rows: UsageRows(usage, by), Unreadable: unreadable}
	if since != nil {
		r.Since = &metav1.Time{Time: since.UTC()}
	}
	return r
}

// UsageRows adds the entries up into one row per combination of the dimensions' values, sorted by
// them in their order.
func UsageRows(usage []NamespaceUsage, by []UsageDimension) []UsageRow {
	sums := map[UsageRow]*usageSum{}
	for _, ns := range usage {
		for _, e := range ns.Entries {
			key := keyOf(UsageRow{Namespace: ns.Namespace, Queue: e.Queue, GlobalQueue: e.GlobalQueue, Cluster: e.Cluster,
				GPUProduct: e.GPUProduct}, by)
			if sums[key] == nil {
				sums[key] = &usageSum{}
			}
			sums[key].add(e.GPUSeconds, e.BorrowedGPUSeconds, e.LostGPUSeconds, e.Cost, e.LostCost)
		}
	}
	rows := make([]UsageRow, 0, len(sums))
	for key, s := range sums {
		rows = append(rows, s.row(key))
	}
	slices.SortFunc(rows, func(a, b UsageRow) int {
		for _, d := range by {
			if c := cmp.Compare(dimension(a, d), dimension(b, d)); c != 0 {
				return c
			}
		}
		return 0
	})
	return rows
}

// UsageTotal adds the rows up.
func UsageTotal(rows []UsageRow) UsageRow {
	var s usageSum
	for _, r := range rows {
		s.add(r.GPUSeconds, r.BorrowedGPUSeconds, r.LostGPUSeconds, r.Cost, r.LostCost)
	}
	return s.row(UsageRow{})
}

// keyOf is the row's values of the dimensions, the others empty.
func keyOf(r UsageRow, by []UsageDimension) UsageRow {
	var key UsageRow
	for _, d := range by {
		switch d {
		case ByNamespace:
			key.Namespace = r.Namespace
		case ByQueue:
			key.Queue = r.Queue
		case ByGlobalQueue:
			key.GlobalQueue = r.GlobalQueue
		case ByCluster:
			key.Cluster = r.Cluster
		case ByProduct:
			key.GPUProduct = r.GPUProduct
		}
	}
	return key
}

// dimension is the row's value of one dimension.
func dimension(r UsageRow, d UsageDimension) string {
	switch d {
	case ByNamespace:
		return r.Namespace
	case ByQueue:
		return r.Queue
	case ByGlobalQueue:
		return r.GlobalQueue
	case ByCluster:
		return r.Cluster
	case ByProduct:
		return r.GPUProduct
	}
	return ""
}

// usageSum adds up GPU time, and the costs of what was priced.
type usageSum struct {
	gpuSeconds, borrowed, lost int64
	cost, lostCost             int64
	costKnown, lostCostKnown   bool
}

func (s *usageSum) add(gpuSeconds, borrowed, lost int64, cost, lostCost gantry.Amount) {
	s.gpuSeconds += gpuSeconds
	s.borrowed += borrowed
	s.lost += lost
	if cost != "" {
		s.cost, s.costKnown = s.cost+cost.Micros(), true
	}
	// Where GPU time was priced and none of it lost, nothing priced was lost.
	if lostCost != "" || (cost != "" && lost == 0) {
		s.lostCost, s.lostCostKnown = s.lostCost+lostCost.Micros(), true
	}
}

// row is the sum as the row of key.
func (s *usageSum) row(key UsageRow) UsageRow {
	r := key
	r.GPUSeconds, r.BorrowedGPUSeconds, r.LostGPUSeconds = s.gpuSeconds, s.borrowed, s.lost
	r.GPUHours = math.Round(float64(s.gpuSeconds)*1e6/3600) / 1e6
	if s.costKnown {
		r.Cost = gantry.AmountOfMicros(s.cost)
	}
	if s.lostCostKnown {
		r.LostCost = gantry.AmountOfMicros(s.lostCost)
	}
	return r
}

// columnOf is each dimension's column in the table, fieldOf its field in a UsageRow's JSON and CSV.
var (
	columnOf = map[UsageDimension]string{ByNamespace: "Namespace", ByQueue: "Queue", ByGlobalQueue: "GlobalQueue",
		ByCluster: "Cluster", ByProduct: "GPU product"}
	fieldOf = map[UsageDimension]string{ByNamespace: "namespace", ByQueue: "queue", ByGlobalQueue: "globalQueue",
		ByCluster: "cluster", ByProduct: "gpuProduct"}
)

// UsageColumns are the names of the table's columns: the dimensions', then the GPU time and cost.
func UsageColumns(by []UsageDimension) []string {
	var names []string
	for _, d := range by {
		names = append(names, columnOf[d])
	}
	return append(names, "GPU-hours", "Borrowed", "Lost", "Cost", "Lost cost")
}

// usageCostColumns are the last columns of the table: Cost and Lost cost.
const usageCostColumns = 2

// UsagePriced says whether any of the rows has a cost. Where none has, no price applied to what they
// count, and a table may leave the cost columns out (WithoutCost).
func UsagePriced(rows []UsageRow) bool {
	return slices.ContainsFunc(rows, func(r UsageRow) bool { return r.Cost != "" || r.LostCost != "" })
}

// WithoutCost leaves the cost columns out of the table's column names or a row's cells (UsageColumns,
// UsageCells, UsageTotalCells).
func WithoutCost(cells []string) []string {
	return cells[:max(0, len(cells)-usageCostColumns)]
}

// UsageCells are a row's cells in the table: the dimensions' values ("-" when empty), GPU-hours with
// two decimals, the costs ("-" where unknown).
func UsageCells(r UsageRow, by []UsageDimension) []string {
	var cells []string
	for _, d := range by {
		cells = append(cells, dashed(dimension(r, d)))
	}
	return append(cells, Hours(r.GPUSeconds), Hours(r.BorrowedGPUSeconds), Hours(r.LostGPUSeconds),
		dashed(string(r.Cost)), dashed(string(r.LostCost)))
}

// UsageTotalCells are the cells of the table's TOTAL row.
func UsageTotalCells(rows []UsageRow, by []UsageDimension) []string {
	cells := UsageCells(UsageTotal(rows), by)
	for i := range by {
		cells[i] = ""
	}
	if len(by) > 0 {
		cells[0] = "TOTAL"
	}
	return cells
}

// Hours writes GPU-seconds as GPU-hours with two decimals.
func Hours(gpuSeconds int64) string {
	return strconv.FormatFloat(float64(gpuSeconds)/3600, 'f', 2, 64)
}

// UsageCSV is the report as CSV records: a header of the fields' JSON names, then a record a row with
// GPU-seconds as integers, GPU-hours as a decimal and costs as their decimal strings (empty where
// unknown).
func UsageCSV(rows []UsageRow, by []UsageDimension) [][]string {
	header := make([]string, 0, len(by)+6)
	for _, d := range by {
		header = append(header, fieldOf[d])
	}
	records := [][]string{append(header, "gpuSeconds", "borrowedGPUSeconds", "lostGPUSeconds", "gpuHours", "cost", "lostCost")}
	for _, r := range rows {
		var record []string
		for _, d := range by {
			record = append(record, dimension(r, d))
		}
		records = append(records, append(record, strconv.FormatInt(r.GPUSeconds, 10), strconv.FormatInt(r.BorrowedGPUSeconds, 10),
			strconv.FormatInt(r.LostGPUSeconds, 10), strconv.FormatFloat(r.GPUHours, 'f', -1, 64), string(r.Cost), string(r.LostCost)))
	}
	return records
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
