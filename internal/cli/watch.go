package cli

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// watch prints the listing as kubectl get -w does: the table (or its objects), then a row (or object)
// again each time a change of the hub's objects changed it, made it or took it away, until ctx ends.
// Each feed is watched with the user's rights from where its list left off; a watch the API server ends,
// as it does after a while, goes on from the last change it saw.
func (o *Options) watch(ctx context.Context, c client.WithWatch, l *listing, p *printing, printer printers.ResourcePrinter) error {
	if p.sortBy() != "" {
		o.warn("warning: --watch requested, --sort-by will be ignored for watch events received")
	}
	first := l.table(o.now())
	shown := keyRows(first)
	if err := p.sort(first); err != nil {
		return err
	}
	emit := o.emitter(printer)
	if err := emit(first.ColumnDefinitions, first.Rows); err != nil {
		return err
	}
	watches := make([]watch.Interface, len(l.feeds))
	defer func() {
		for _, w := range watches {
			if w != nil {
				w.Stop()
			}
		}
	}()
	for i, f := range l.feeds {
		w, err := f.watch(ctx, c)
		if err != nil {
			return err
		}
		watches[i] = w
	}
	return o.follow(ctx, l, watches, func(i int) (watch.Interface, error) { return l.feeds[i].watch(ctx, c) }, emit, shown)
}

// emitter prints rows: as a table, whose headers the printer prints once and whose columns stay as wide
// as they were, or their objects one by one.
func (o *Options) emitter(printer printers.ResourcePrinter) func([]metav1.TableColumnDefinition, []metav1.TableRow) error {
	table := printers.GetNewTabWriter(o.Out)
	return func(columns []metav1.TableColumnDefinition, rows []metav1.TableRow) error {
		// The printer decorates the rows it is given (labels, -L columns); those kept for the next
		// comparison stay as they were.
		rows = slices.Clone(rows)
		if err := unstructuredRows(rows); err != nil {
			return err
		}
		if isTable(printer) {
			if err := printer.PrintObj(&metav1.Table{ColumnDefinitions: columns, Rows: rows}, table); err != nil {
				return err
			}
			return table.Flush()
		}
		for _, obj := range objectsOf(rows) {
			if err := printer.PrintObj(obj, o.Out); err != nil {
				return err
			}
		}
		return nil
	}
}

// follow takes in each change the watches see, one per feed of the listing, and emits the rows it
// changed, until ctx ends. reopen watches feed i again.
func (o *Options) follow(ctx context.Context, l *listing, watches []watch.Interface, reopen func(i int) (watch.Interface, error),
	emit func([]metav1.TableColumnDefinition, []metav1.TableRow) error, shown []keyedRow) error {
	receive := func(w watch.Interface) reflect.SelectCase {
		return reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.ResultChan())}
	}
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	for _, w := range watches {
		cases = append(cases, receive(w))
	}
	for {
		chosen, event, open := reflect.Select(cases)
		if chosen == 0 {
			return nil
		}
		i := chosen - 1
		if !open {
			watches[i].Stop()
			w, err := reopen(i)
			if ctx.Err() != nil {
				if w != nil {
					w.Stop()
				}
				return nil
			}
			if err != nil {
				return err
			}
			watches[i], cases[chosen] = w, receive(w)
			continue
		}
		changed, err := l.feeds[i].apply(event.Interface().(watch.Event))
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		t := l.table(o.now())
		var rows []metav1.TableRow
		rows, shown = changedRows(shown, t)
		if len(rows) > 0 {
			if err := emit(t.ColumnDefinitions, rows); err != nil {
				return err
			}
		}
	}
}

// keyedRow is a row and what names it: its object's kind, namespace and name, and its place among the
// rows of that object.
type keyedRow struct {
	key string
	row metav1.TableRow
}

func keyRows(t *metav1.Table) []keyedRow {
	out := make([]keyedRow, len(t.Rows))
	count := map[string]int{}
	for i, r := range t.Rows {
		name := fmt.Sprintf("%T", r.Object.Object)
		if m, err := apimeta.Accessor(r.Object.Object); err == nil {
			name = r.Object.Object.GetObjectKind().GroupVersionKind().Kind + "/" + m.GetNamespace() + "/" + m.GetName()
		}
		out[i] = keyedRow{key: fmt.Sprintf("%s#%d", name, count[name]), row: r}
		count[name]++
	}
	return out
}

// changedRows are the rows of next that are new or differ from those shown (in more than their age),
// then the rows shown that next no longer has, as they were last; and next's rows, to compare the next
// table with.
func changedRows(shown []keyedRow, next *metav1.Table) ([]metav1.TableRow, []keyedRow) {
	age := slices.IndexFunc(next.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == ageColumn })
	before := make(map[string]metav1.TableRow, len(shown))
	for _, k := range shown {
		before[k.key] = k.row
	}
	keyed := keyRows(next)
	var out []metav1.TableRow
	for _, k := range keyed {
		prev, ok := before[k.key]
		if !ok || !sameCells(prev.Cells, k.row.Cells, age) {
			out = append(out, k.row)
		}
		delete(before, k.key)
	}
	for _, k := range shown {
		if _, gone := before[k.key]; gone {
			out = append(out, k.row)
		}
	}
	return out, keyed
}

func sameCells(a, b []any, skip int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if i != skip && !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}
