package cli

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	kubectlget "k8s.io/kubectl/pkg/cmd/get"
)

// printing is how a list command prints, with kubectl get's flags: -o (wide, name, json, yaml, jsonpath,
// custom-columns, go-template and their -file forms), --no-headers, --show-labels, -L, --sort-by,
// --template. A table is Gantry's view; the other formats print the objects its rows are for.
type printing struct {
	flags *kubectlget.PrintFlags
}

func newPrinting() *printing {
	flags := kubectlget.NewGetPrintFlags()
	// Each command lists one kind, or several named in a KIND column.
	flags.HumanReadableFlags.ShowKind = nil
	return &printing{flags: flags}
}

func (p *printing) addFlags(cmd *cobra.Command) { p.flags.AddFlags(cmd) }

func (p *printing) sortBy() string { return *p.flags.HumanReadableFlags.SortBy }

// printer is the printer the flags ask for. A format it does not know, a template that does not parse
// or a --sort-by that is no JSONPath is refused here, before anything is read from the hub.
func (p *printing) printer() (printers.ResourcePrinter, error) {
	printer, err := p.flags.ToPrinter()
	if err != nil {
		return nil, err
	}
	if p.sortBy() != "" {
		if _, err := sortField(p.sortBy()); err != nil {
			return nil, fmt.Errorf("bad --sort-by %q: %w", p.sortBy(), err)
		}
	}
	return printer, nil
}

// sortField is --sort-by as a JSONPath template, which kubectl takes with or without braces and the
// leading dot.
func sortField(sortBy string) (string, error) {
	field, err := kubectlget.RelaxedJSONPathExpression(sortBy)
	if err != nil {
		return "", err
	}
	return field, jsonpath.New("sort-by").Parse(field)
}

// isTable says whether the printer prints tables: the default format and -o wide.
func isTable(printer printers.ResourcePrinter) bool {
	_, ok := printer.(*printers.HumanReadablePrinter)
	return ok
}

// show prints the table sorted by --sort-by, or in another format the objects of its rows, in their
// order, as one list of kind listKind.
func (p *printing) show(w io.Writer, printer printers.ResourcePrinter, t *metav1.Table, listKind schema.GroupVersionKind) error {
	if err := p.sort(t); err != nil {
		return err
	}
	if isTable(printer) {
		return printer.PrintObj(t, w)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(listKind)
	for _, obj := range objectsOf(t.Rows) {
		list.Items = append(list.Items, *obj)
	}
	return printer.PrintObj(list, w)
}

// sort sorts the rows by --sort-by, a JSONPath over their objects, once those are unstructured.
func (p *printing) sort(t *metav1.Table) error {
	if err := unstructuredRows(t.Rows); err != nil {
		return err
	}
	if p.sortBy() == "" || len(t.Rows) < 2 {
		return nil
	}
	field, err := sortField(p.sortBy())
	if err != nil {
		return err
	}
	sorter, err := kubectlget.NewTableSorter(t, field)
	if err != nil {
		return err
	}
	// Stable, so that the rows of one object (a GlobalQueue's clusters) keep their order.
	sort.Stable(sorter)
	return nil
}

// unstructuredRows turns the object of each row into its unstructured form, as kubectl's printers and
// sorter read objects from an API server; rows of one object share one. Its apiVersion and kind must be
// set.
func unstructuredRows(rows []metav1.TableRow) error {
	converted := map[runtime.Object]*unstructured.Unstructured{}
	for i := range rows {
		obj := rows[i].Object.Object
		if _, done := obj.(*unstructured.Unstructured); done || obj == nil {
			continue
		}
		if converted[obj] == nil {
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				return err
			}
			converted[obj] = &unstructured.Unstructured{Object: content}
		}
		rows[i].Object.Object = converted[obj]
	}
	return nil
}

// objectsOf are the objects of the rows, each once, in the order of their first row.
func objectsOf(rows []metav1.TableRow) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	seen := map[*unstructured.Unstructured]bool{}
	for _, r := range rows {
		if u, ok := r.Object.Object.(*unstructured.Unstructured); ok && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// column is a table column; priority 1 shows only with -o wide.
func column(name string, priority int32) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Priority: priority}
}

// ageColumn is the column of how old a row's object is, which grows by itself: a watch prints a row
// again only when something else in it changed.
const ageColumn = "Age"

// row is a table row for obj.
func row(obj runtime.Object, cells ...any) metav1.TableRow {
	return metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: obj}}
}
