package view

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func TestParseSince(t *testing.T) {
	const notADuration, negative = "is not a duration", "is negative"
	for in, tc := range map[string]struct {
		want    time.Duration
		wantErr string
	}{
		"7d":                    {want: 7 * 24 * time.Hour},
		"30d":                   {want: 30 * 24 * time.Hour},
		"0d":                    {want: 0},
		"36h":                   {want: 36 * time.Hour},
		"90m":                   {want: 90 * time.Minute},
		"1h30m":                 {want: 90 * time.Minute},
		"1d12h":                 {want: 36 * time.Hour},
		" 2d ":                  {want: 48 * time.Hour},
		"":                      {wantErr: notADuration},
		"7":                     {wantErr: notADuration},
		"7x":                    {wantErr: notADuration},
		"d":                     {wantErr: notADuration},
		"7dd":                   {wantErr: notADuration},
		"1.5d":                  {wantErr: notADuration},
		"7days":                 {wantErr: notADuration},
		"1w":                    {wantErr: notADuration},
		"-3d":                   {wantErr: negative},
		"-1h":                   {wantErr: negative},
		"1d-1h":                 {wantErr: notADuration},
		"1000000d":              {wantErr: notADuration},
		"99999999999999999999d": {wantErr: notADuration},
	} {
		got, err := ParseSince(in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseSince(%q) = %v, %v; want an error saying %q", in, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, tc.want)
		}
	}
}

// --since counts whole UTC days: from the start of the UTC day of now−since, whatever the zone of now.
func TestSinceDay(t *testing.T) {
	now := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	tokyo := time.FixedZone("JST", 9*3600)
	for _, tc := range []struct {
		now   time.Time
		since time.Duration
		want  string
	}{
		{now, 0, "2026-05-01"},
		{now, 13 * time.Hour, "2026-05-01"},
		{now, 13*time.Hour + time.Second, "2026-04-30"},
		{now, 36 * time.Hour, "2026-04-30"},
		{now, 7 * 24 * time.Hour, "2026-04-24"},
		{now, 30 * 24 * time.Hour, "2026-04-01"},
		// 2026-05-01 08:00 in Tokyo is 2026-04-30 23:00 UTC.
		{time.Date(2026, 5, 1, 8, 0, 0, 0, tokyo), 0, "2026-04-30"},
	} {
		got := SinceDay(tc.now, tc.since)
		if got.Location() != time.UTC || got.Format(time.RFC3339) != tc.want+"T00:00:00Z" {
			t.Errorf("SinceDay(%s, %v) = %s, want %sT00:00:00Z", tc.now, tc.since, got, tc.want)
		}
	}
}

func TestParseUsageBy(t *testing.T) {
	for in, tc := range map[string]struct {
		want    []UsageDimension
		wantErr string
	}{
		"namespace,queue,globalqueue,cluster,product": {want: UsageDimensions},
		"cluster":               {want: []UsageDimension{ByCluster}},
		"product, Namespace":    {want: []UsageDimension{ByProduct, ByNamespace}},
		"GlobalQueue":           {want: []UsageDimension{ByGlobalQueue}},
		"":                      {wantErr: `"" is not a dimension`},
		"cluster,":              {wantErr: `"" is not a dimension`},
		"team":                  {wantErr: `"team" is not a dimension: want some of namespace, queue, globalqueue, cluster, product`},
		"cluster,queue,cluster": {wantErr: "cluster is named twice"},
	} {
		got, err := ParseUsageBy(in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseUsageBy(%q) = %v, %v; want an error saying %q", in, got, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !cmp.Equal(got, tc.want)):
			t.Errorf("ParseUsageBy(%q) = %v, %v; want %v", in, got, err, tc.want)
		}
	}
}

// usedByTeams are two namespaces' usage: team-a on a priced and an unpriced cluster, team-b priced.
func usedByTeams() []NamespaceUsage {
	return []NamespaceUsage{
		{Namespace: "team-b", Entries: []gantry.UsageEntry{
			{Queue: "qb", GlobalQueue: "gpus", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 3600, Cost: "2.5", LostCost: ""}}},
		{Namespace: "team-a", Entries: []gantry.UsageEntry{
			{Queue: "qa", GlobalQueue: "gpus", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 7200, BorrowedGPUSeconds: 1800,
				LostGPUSeconds: 900, Cost: "5", LostCost: "0.625"},
			{Queue: "qa", GlobalQueue: "vision", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 1, Cost: "0.000694"},
			{Queue: "qa", GlobalQueue: "gpus", Cluster: "worker-2", GPUProduct: "H100", GPUSeconds: 36000, LostGPUSeconds: 3600},
			{Queue: "qa", Cluster: "worker-2", GPUSeconds: 10},
		}},
	}
}

func TestUsageRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		by   []UsageDimension
		want []UsageRow
	}{
		{"every dimension", UsageDimensions, []UsageRow{
			{Namespace: "team-a", Queue: "qa", Cluster: "worker-2", GPUSeconds: 10, GPUHours: 0.002778},
			{Namespace: "team-a", Queue: "qa", GlobalQueue: "gpus", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 7200,
				BorrowedGPUSeconds: 1800, LostGPUSeconds: 900, GPUHours: 2, Cost: "5", LostCost: "0.625"},
			{Namespace: "team-a", Queue: "qa", GlobalQueue: "gpus", Cluster: "worker-2", GPUProduct: "H100", GPUSeconds: 36000,
				LostGPUSeconds: 3600, GPUHours: 10},
			{Namespace: "team-a", Queue: "qa", GlobalQueue: "vision", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 1,
				GPUHours: 0.000278, Cost: "0.000694", LostCost: "0"},
			{Namespace: "team-b", Queue: "qb", GlobalQueue: "gpus", Cluster: "worker-1", GPUProduct: "A100", GPUSeconds: 3600,
				GPUHours: 1, Cost: "2.5", LostCost: "0"},
		}},
		// A cost is that of what was priced; a lost cost is unknown where something lost was not priced.
		{"by cluster", []UsageDimension{ByCluster}, []UsageRow{
			{Cluster: "worker-1", GPUSeconds: 10801, BorrowedGPUSeconds: 1800, LostGPUSeconds: 900, GPUHours: 3.000278,
				Cost: "7.500694", LostCost: "0.625"},
			{Cluster: "worker-2", GPUSeconds: 36010, LostGPUSeconds: 3600, GPUHours: 10.002778},
		}},
		{"by product then namespace", []UsageDimension{ByProduct, ByNamespace}, []UsageRow{
			{Namespace: "team-a", GPUSeconds: 10, GPUHours: 0.002778},
			{GPUProduct: "A100", Namespace: "team-a", GPUSeconds: 7201, BorrowedGPUSeconds: 1800, LostGPUSeconds: 900, GPUHours: 2.000278,
				Cost: "5.000694", LostCost: "0.625"},
			{GPUProduct: "A100", Namespace: "team-b", GPUSeconds: 3600, GPUHours: 1, Cost: "2.5", LostCost: "0"},
			{GPUProduct: "H100", Namespace: "team-a", GPUSeconds: 36000, LostGPUSeconds: 3600, GPUHours: 10},
		}},
		{"by namespace", []UsageDimension{ByNamespace}, []UsageRow{
			{Namespace: "team-a", GPUSeconds: 43211, BorrowedGPUSeconds: 1800, LostGPUSeconds: 4500, GPUHours: 12.003056,
				Cost: "5.000694", LostCost: "0.625"},
			{Namespace: "team-b", GPUSeconds: 3600, GPUHours: 1, Cost: "2.5", LostCost: "0"},
		}},
	} {
		if diff := cmp.Diff(tc.want, UsageRows(usedByTeams(), tc.by)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if rows := UsageRows(nil, UsageDimensions); rows == nil || len(rows) != 0 {
		t.Errorf("no usage: %#v, want no rows (an empty list in JSON)", rows)
	}
}

func TestUsageTableAndCSV(t *testing.T) {
	by := []UsageDimension{ByNamespace, ByCluster}
	rows := UsageRows(usedByTeams(), by)
	var table [][]string
	table = append(table, UsageColumns(by))
	for _, r := range rows {
		table = append(table, UsageCells(r, by))
	}
	table = append(table, UsageTotalCells(rows, by))
	want := [][]string{
		{"Namespace", "Cluster", "GPU-hours", "Borrowed", "Lost", "Cost", "Lost cost"},
		{"team-a", "worker-1", "2.00", "0.50", "0.25", "5.000694", "0.625"},
		{"team-a", "worker-2", "10.00", "0.00", "1.00", "-", "-"},
		{"team-b", "worker-1", "1.00", "0.00", "0.00", "2.5", "0"},
		{"TOTAL", "", "13.00", "0.50", "1.25", "7.500694", "0.625"},
	}
	if diff := cmp.Diff(want, table); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	wantCSV := [][]string{
		{"namespace", "cluster", "gpuSeconds", "borrowedGPUSeconds", "lostGPUSeconds", "gpuHours", "cost", "lostCost"},
		{"team-a", "worker-1", "7201", "1800", "900", "2.000278", "5.000694", "0.625"},
		{"team-a", "worker-2", "36010", "0", "3600", "10.002778", "", ""},
		{"team-b", "worker-1", "3600", "0", "0", "1", "2.5", "0"},
	}
	if diff := cmp.Diff(wantCSV, UsageCSV(rows, by)); diff != "" {
		t.Errorf("CSV (-want +got):\n%s", diff)
	}
	// Priced GPU time not lost, and lost GPU time not priced: no priced GPU time was lost.
	mixed := UsageRows([]NamespaceUsage{{Namespace: "team-c", Entries: []gantry.UsageEntry{
		{Queue: "q", Cluster: "priced", GPUSeconds: 3600, Cost: "2"},
		{Queue: "q", Cluster: "unpriced", GPUSeconds: 3600, LostGPUSeconds: 3600}}}}, []UsageDimension{ByQueue})
	if got := UsageCells(mixed[0], []UsageDimension{ByQueue}); !cmp.Equal(got, []string{"q", "2.00", "0.00", "1.00", "2", "0"}) {
		t.Errorf("priced time not lost and lost time not priced: %q", got)
	}
	// Nothing priced: no cost, in the total too.
	unpriced := UsageRows([]NamespaceUsage{{Namespace: "team-c", Entries: []gantry.UsageEntry{{Queue: "q", Cluster: "c", GPUSeconds: 5400}}}},
		[]UsageDimension{ByQueue})
	if got := UsageTotalCells(unpriced, []UsageDimension{ByQueue}); !cmp.Equal(got, []string{"TOTAL", "1.50", "0.00", "0.00", "-", "-"}) {
		t.Errorf("total of unpriced usage: %q", got)
	}
}

// A table of rows none of which is priced may leave out the cost columns: of its head, rows and total.
func TestUsageWithoutCost(t *testing.T) {
	by := []UsageDimension{ByNamespace}
	unpriced := UsageRows([]NamespaceUsage{{Namespace: "team-c", Entries: []gantry.UsageEntry{
		{Queue: "q", Cluster: "c", GPUSeconds: 5400, LostGPUSeconds: 1800}}}}, by)
	for _, tc := range []struct {
		name   string
		rows   []UsageRow
		priced bool
	}{
		{"none", nil, false},
		{"unpriced", unpriced, false},
		{"priced", UsageRows(usedByTeams(), by), true},
		{"one priced of several", UsageRows(usedByTeams(), []UsageDimension{ByCluster}), true},
		{"a lost cost alone", []UsageRow{{Namespace: "team-c", LostCost: "1"}}, true},
	} {
		if got := UsagePriced(tc.rows); got != tc.priced {
			t.Errorf("UsagePriced(%s) = %v, want %v", tc.name, got, tc.priced)
		}
	}
	for _, tc := range []struct {
		cells, want []string
	}{
		{UsageColumns(by), []string{"Namespace", "GPU-hours", "Borrowed", "Lost"}},
		{UsageCells(unpriced[0], by), []string{"team-c", "1.50", "0.00", "0.50"}},
		{UsageTotalCells(unpriced, by), []string{"TOTAL", "1.50", "0.00", "0.50"}},
		{UsageColumns(nil), []string{"GPU-hours", "Borrowed", "Lost"}},
		{[]string{"Cost"}, []string{}},
	} {
		if got := WithoutCost(tc.cells); !cmp.Equal(got, tc.want) {
			t.Errorf("WithoutCost(%q) = %q, want %q", tc.cells, got, tc.want)
		}
	}
}

// The report's JSON is what docs/cli.md says: since is left out without --since, rows is a list even
// when empty, and a column not in --by is left out of the rows.
func TestUsageReportJSON(t *testing.T) {
	now := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	since := SinceDay(now, 7*24*time.Hour)
	for _, tc := range []struct {
		report UsageReport
		want   string
	}{
		{NewUsageReport(nil, UsageDimensions, nil, now, nil),
			`{"apiVersion":"cli.gantry.dev/v1","kind":"UsageReport","by":["namespace","queue","globalqueue","cluster","product"],` +
				`"now":"2026-05-01T13:00:00Z","rows":[]}`},
		{NewUsageReport(usedByTeams()[:1], []UsageDimension{ByNamespace}, &since, now, []string{"WorkerClusters"}),
			`{"apiVersion":"cli.gantry.dev/v1","kind":"UsageReport","by":["namespace"],"since":"2026-04-24T00:00:00Z",` +
				`"now":"2026-05-01T13:00:00Z","rows":[{"namespace":"team-b","gpuSeconds":3600,"borrowedGPUSeconds":0,"lostGPUSeconds":0,` +
				`"gpuHours":1,"cost":"2.5","lostCost":"0"}],"unreadable":["WorkerClusters"]}`},
	} {
		got, err := json.Marshal(tc.report)
		if err != nil || string(got) != tc.want {
			t.Errorf("JSON %s (%v), want\n%s", got, err, tc.want)
		}
	}
}
