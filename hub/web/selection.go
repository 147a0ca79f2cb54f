package web

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gantry-dev/gantry/hub/visibility"
	"github.com/gantry-dev/gantry/internal/view"
)

const (
	// PageSize is how many jobs one page of the table shows.
	PageSize = 50
	// FinishedShownFor is how long a finished job stays on the page.
	FinishedShownFor = 24 * time.Hour
	// maxChoices bounds the values a filter offers to pick from.
	maxChoices = 200
)

// Orders the table can be sorted by: the queue's (what runs, then what waits in position order, then
// what finished, the latest first), by age, or by namespace and name.
const (
	SortQueue  = "queue"
	SortNewest = "newest"
	SortOldest = "oldest"
	SortName   = "name"
)

// States a filter may ask for besides view's: every one but Finished (the default), and all of them.
const (
	StateUnfinished = ""
	StateAll        = "All"
)

var (
	sorts  = []string{SortQueue, SortNewest, SortOldest, SortName}
	states = []string{StateAll, view.StatePending, view.StateAdmitted, view.StateRunning, view.StateDeleting, view.StateFinished}
)

// Query is what a reader asks of the table: filters (empty matches all), an order and a page from 1.
type Query struct {
	Namespace, Queue, GlobalQueue, Cluster, State string
	Sort                                          string
	Page                                          int
}

// queryParams are the query parameters the page takes, so that a misspelt one is refused.
var queryParams = []string{"namespace", "queue", "globalQueue", "cluster", "state", "sort", "page"}

// ParseQuery reads a Query from the page's URL.
func ParseQuery(q url.Values) (Query, error) {
	for k := range q {
		if !slices.Contains(queryParams, k) {
			return Query{}, fmt.Errorf("unknown query parameter %q: the page takes %s", k, strings.Join(queryParams, ", "))
		}
	}
	out := Query{Namespace: q.Get("namespace"), Queue: q.Get("queue"), GlobalQueue: q.Get("globalQueue"), Cluster: q.Get("cluster"),
		State: q.Get("state"), Sort: cmp.Or(q.Get("sort"), SortQueue), Page: 1}
	if out.State != StateUnfinished && !slices.Contains(states, out.State) {
		return Query{}, fmt.Errorf("state %q: want one of %s, or none for every unfinished job", out.State, strings.Join(states, ", "))
	}
	if !slices.Contains(sorts, out.Sort) {
		return Query{}, fmt.Errorf("sort %q: want one of %s", out.Sort, strings.Join(sorts, ", "))
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Query{}, fmt.Errorf("page %q: want a number from 1", v)
		}
		out.Page = n
	}
	return out, nil
}

// Values is the query as URL parameters, without those at their defaults.
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, p := range []struct{ name, value, zero string }{{"namespace", q.Namespace, ""}, {"queue", q.Queue, ""},
		{"globalQueue", q.GlobalQueue, ""}, {"cluster", q.Cluster, ""}, {"state", q.State, ""}, {"sort", q.Sort, SortQueue},
		{"page", strconv.Itoa(q.Page), "1"}} {
		if p.value != p.zero {
			v.Set(p.name, p.value)
		}
	}
	return v
}

// placedRow is a row where it stands in its GlobalQueue, when it waits.
type placedRow struct {
	*Row
	At visibility.Placement
}

// PositionText is "3/7": third of the 7 that wait in its GlobalQueue; "-" for a row that does not wait.
func (r placedRow) PositionText() string {
	return view.Position{GlobalQueue: r.At.GlobalQueue, Index: r.At.InGlobalQueue, Of: r.At.Of}.String()
}

// GlobalQueueName is the GlobalQueue the row waits in, or whose quota it uses.
func (r placedRow) GlobalQueueName() string { return cmp.Or(r.At.GlobalQueue, r.GlobalQueue) }

// snapshot is every row at one time, in the queue's order, and in the others when asked for them.
type snapshot struct {
	at   time.Time
	rows []placedRow
	// runningOn counts the unfinished jobs each cluster won.
	runningOn map[string]int

	mu     sync.Mutex
	orders map[string][]int32
}

// newSnapshot puts the rows in the queue's order: those that won a cluster, then those that wait in
// position order (waiting), then the others that wait, then the finished ones, the latest first.
func newSnapshot(at time.Time, waiting, others []placedRow, runningOn map[string]int) *snapshot {
	slices.SortFunc(others, func(a, b placedRow) int {
		if c := cmp.Compare(rankOf(a.State), rankOf(b.State)); c != 0 {
			return c
		}
		if c := b.Finished.Compare(a.Finished); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.GlobalQueue, b.GlobalQueue), a.Created.Compare(b.Created), compareNames(a, b))
	})
	split, _ := slices.BinarySearchFunc(others, rankOf(view.StatePending), func(r placedRow, rank int) int { return cmp.Compare(rankOf(r.State), rank) })
	rows := make([]placedRow, 0, len(waiting)+len(others))
	rows = append(append(append(rows, others[:split]...), waiting...), others[split:]...)
	return &snapshot{at: at, rows: rows, runningOn: runningOn, orders: map[string][]int32{}}
}

func rankOf(state string) int {
	switch state {
	case view.StateRunning:
		return 0
	case view.StateAdmitted:
		return 1
	case view.StateDeleting:
		return 2
	case view.StatePending:
		return 3
	default:
		return 4
	}
}

func compareNames(a, b placedRow) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(string(a.Kind), string(b.Kind)))
}

// order is the rows' indexes in the named order, sorted once per snapshot when first asked for.
func (s *snapshot) order(name string) []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[name]; ok {
		return o
	}
	o := make([]int32, len(s.rows))
	for i := range o {
		o[i] = int32(i)
	}
	byCreated := func(a, b int32) int {
		return cmp.Or(s.rows[a].Created.Compare(s.rows[b].Created), compareNames(s.rows[a], s.rows[b]))
	}
	switch name {
	case SortNewest:
		slices.SortFunc(o, func(a, b int32) int { return byCreated(b, a) })
	case SortOldest:
		slices.SortFunc(o, byCreated)
	case SortName:
		slices.SortFunc(o, func(a, b int32) int { return compareNames(s.rows[a], s.rows[b]) })
	}
	s.orders[name] = o
	return o
}

// Selection is one page of the rows a reader asked for and may see.
type Selection struct {
	Rows []placedRow
	// Matching counts the rows of every page; First is the number of the page's first, from 1.
	Matching, First int
	// Namespaces, Queues, GlobalQueues and Clusters are the values the reader's rows have, to filter by.
	Namespaces, Queues, GlobalQueues, Clusters []string
	// HiddenNamespaces counts the namespaces with jobs the reader may not see (of one kind at least).
	HiddenNamespaces int
}

// Select cuts the page the query asks for from the rows visible says the reader may see, in one walk
// of the snapshot's rows in the query's order.
func (s *snapshot) Select(q Query, visible func(*Row) bool, now time.Time) Selection {
	var sel Selection
	choices := [4]map[string]bool{{}, {}, {}, {}}
	hidden := map[string]bool{}
	skip := (q.Page - 1) * PageSize
	for _, i := range s.order(q.Sort) {
		r := s.rows[i]
		if r.State == view.StateFinished && now.Sub(r.Finished) > FinishedShownFor {
			continue
		}
		if !visible(r.Row) {
			hidden[r.Namespace] = true
			continue
		}
		for j, v := range []string{r.Namespace, r.Queue, r.GlobalQueueName(), r.Cluster} {
			if v != "" && len(choices[j]) < maxChoices {
				choices[j][v] = true
			}
		}
		if !q.matches(r) {
			continue
		}
		sel.Matching++
		if sel.Matching > skip && len(sel.Rows) < PageSize {
			sel.Rows = append(sel.Rows, r)
		}
	}
	sel.First = min(skip+1, sel.Matching)
	sel.HiddenNamespaces = len(hidden)
	sel.Namespaces, sel.Queues, sel.GlobalQueues, sel.Clusters = sorted(choices[0]), sorted(choices[1]), sorted(choices[2]), sorted(choices[3])
	return sel
}

func (q Query) matches(r placedRow) bool {
	switch {
	case q.Namespace != "" && r.Namespace != q.Namespace, q.Queue != "" && r.Queue != q.Queue,
		q.GlobalQueue != "" && r.GlobalQueueName() != q.GlobalQueue, q.Cluster != "" && r.Cluster != q.Cluster:
		return false
	case q.State == StateAll:
		return true
	case q.State == StateUnfinished:
		return r.State != view.StateFinished
	default:
		return r.State == q.State
	}
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// Through is the number of the page's last row, from 1.
func (s Selection) Through() int { return s.First + len(s.Rows) - 1 }
