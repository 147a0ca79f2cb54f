package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// listCommand is a command that reads from the hub and prints a table of what it read, or (-o json,
// yaml) the objects themselves.
func listCommand(o *Options, use, short, example string,
	read func(context.Context, client.Client) (*metav1.Table, runtime.Object, error)) *cobra.Command {
	var out output
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			table, objects, err := read(cmd.Context(), c)
			if err != nil {
				return err
			}
			return out.print(o.Out, table, objects)
		},
	}
	out.addFlag(cmd)
	return cmd
}

// output is the -o flag of a command: table (the default), wide, json or yaml.
type output struct{ format string }

func (o *output) addFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "Output format: table, wide, json or yaml.")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})
}

// print writes the table, or the objects it was made from as JSON or YAML.
func (o *output) print(w io.Writer, table *metav1.Table, objects runtime.Object) error {
	switch o.format {
	case "table", "":
		return printers.NewTablePrinter(printers.PrintOptions{}).PrintObj(table, w)
	case "wide":
		return printers.NewTablePrinter(printers.PrintOptions{Wide: true}).PrintObj(table, w)
	case "json", "yaml":
		if err := setKinds(objects); err != nil {
			return err
		}
		if o.format == "json" {
			return (&printers.JSONPrinter{}).PrintObj(objects, w)
		}
		return (&printers.YAMLPrinter{}).PrintObj(objects, w)
	}
	return fmt.Errorf("unknown output format %q: use table, wide, json or yaml", o.format)
}

// setKinds fills in apiVersion and kind on a typed list and its items, which the client leaves empty.
func setKinds(list runtime.Object) error {
	s := Scheme()
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, obj := range append(items, list) {
		gvk, err := apiutil.GVKForObject(obj, s)
		if err != nil {
			return err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
	return apimeta.SetList(list, items)
}

// column is a table column; priority 1 shows only with -o wide.
func column(name string, priority int32) metav1.TableColumnDefinition {
	return metav1.TableColumnDefinition{Name: name, Type: "string", Priority: priority}
}
