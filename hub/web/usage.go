package web

import (
	"context"
	"fmt"
	"slices"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch/accounting"
	"github.com/gantry-dev/gantry/internal/view"
)

// UsageWindow is how far back the overview counts GPU time: whole UTC days from the start of the day
// UsageWindow ago, as kubectl gantry usage --since 7d counts them.
const UsageWindow = 7 * 24 * time.Hour

// UsageTable is the GPU time of the namespaces whose Usage the reader may list, by namespace, Queue,
// GlobalQueue, cluster and GPU product, as kubectl gantry usage shows it.
type UsageTable struct {
	// Since is the UTC day counted from, as 2026-04-24.
	Since string
	// Head names the columns.
	Head, Total UsageLine
	Rows        []UsageLine
}

// Width is the number of the table's columns.
func (t *UsageTable) Width() int { return len(t.Head.Keys) + len(t.Head.Figures) }

// UsageLine is one row of a UsageTable: its namespace (empty for the head and the total) and its cells,
// split into those that name what it counts and its figures.
type UsageLine struct {
	Namespace     string
	Keys, Figures []string
}

// usageAccess is the question whether the reader may list the Usages of ns (every namespace when empty).
func usageAccess(ns string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: "list", Group: gantry.GroupVersion.Group, Resource: "usages", Namespace: ns}
}

// readUsage is what the namespaces whose Usages the reader may list used in the UsageWindow to now:
// their Usages and the runs these do not count yet (accounting.Summarize), priced at the clusters'
// prices. Nil when the reader may list Usages in no namespace that has one or runs. Only the namespaces
// shown are added up.
func (h *Handler) readUsage(ctx context.Context, clusters []gantry.WorkerCluster, now time.Time) (*UsageTable, error) {
	everywhere, err := h.Allowed(ctx, usageAccess(""))
	if err != nil {
		return nil, err
	}
	// The Usages before the Workloads, as kubectl gantry usage reads them.
	var list gantry.UsageList
	if err := h.Cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading the hub's cache: %w", err)
	}
	usages := make(map[string]*gantry.UsageStatus, len(list.Items))
	for i := range list.Items {
		usages[list.Items[i].Namespace] = &list.Items[i].Status
	}
	namespaces := h.Table.ranNamespaces()
	for ns := range usages {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	shown := namespaces
	if !everywhere {
		shown = nil
		for _, ns := range namespaces {
			ok, err := h.Allowed(ctx, usageAccess(ns))
			if err != nil {
				return nil, err
			}
			if ok {
				shown = append(shown, ns)
			}
		}
		if len(shown) == 0 {
			return nil, nil
		}
	}
	prices, since := accounting.ClustersOf(clusters), view.SinceDay(now, UsageWindow)
	var used []view.NamespaceUsage
	for _, ns := range shown {
		entries := accounting.Summarize(accounting.Namespace{Usage: usages[ns], Workloads: h.Table.ranIn(ns), Clusters: prices, Now: now}, since)
		if len(entries) > 0 {
			used = append(used, view.NamespaceUsage{Namespace: ns, Entries: entries})
		}
	}
	return usageTable(view.UsageRows(used, view.UsageDimensions), since), nil
}

// usageTable lays the rows out as kubectl gantry usage does, with their total; without the cost
// columns when none of the rows is priced.
func usageTable(rows []view.UsageRow, since time.Time) *UsageTable {
	by := view.UsageDimensions
	priced := view.UsagePriced(rows)
	cells := func(c []string) []string {
		if !priced {
			return view.WithoutCost(c)
		}
		return c
	}
	line := func(ns string, c []string) UsageLine {
		c = cells(c)
		return UsageLine{Namespace: ns, Keys: c[:len(by)], Figures: c[len(by):]}
	}
	t := &UsageTable{Since: since.Format(time.DateOnly), Head: line("", view.UsageColumns(by)), Total: line("", view.UsageTotalCells(rows, by))}
	for _, r := range rows {
		t.Rows = append(t.Rows, line(r.Namespace, view.UsageCells(r, by)))
	}
	return t
}
