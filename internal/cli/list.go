package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// A listing is what a list command shows: the objects it read from the hub, in feeds that --watch keeps
// current, and how it makes its table of them.
type listing struct {
	feeds []*feed
	// table makes the table of the feeds' objects as they are now. Each row's Object is the object the
	// row is for, which -o json, yaml, name, jsonpath, custom-columns and go-template print and
	// --sort-by reads.
	table func(now time.Time) *metav1.Table
	// listKind is the kind of list those formats print the objects in.
	listKind schema.GroupVersionKind
}

// A feed is the objects of one kind a listing reads, by namespace and name.
type feed struct {
	// kind names the objects in messages: "WorkerClusters".
	kind    string
	newList func() client.ObjectList
	opts    []client.ListOption
	// gvk is the objects' own, set on each, which the printers need and the client leaves empty.
	gvk     schema.GroupVersionKind
	objects map[types.NamespacedName]client.Object
	// version is the resourceVersion a watch goes on from: the list's, then the last event's.
	version string
}

func newFeed(kind string, newList func() client.ObjectList, opts ...client.ListOption) *feed {
	gvk, err := apiutil.GVKForObject(newList(), Scheme())
	if err != nil {
		// Every list a command reads is of a kind of Scheme().
		panic(err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return &feed{kind: kind, newList: newList, opts: opts, gvk: gvk}
}

// read lists the feed's objects.
func (f *feed) read(ctx context.Context, c client.Reader) error {
	list := f.newList()
	if err := c.List(ctx, list, f.opts...); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	f.objects = make(map[types.NamespacedName]client.Object, len(items))
	for _, item := range items {
		f.put(item.(client.Object))
	}
	f.version = list.GetResourceVersion()
	return nil
}

func (f *feed) put(obj client.Object) {
	obj.GetObjectKind().SetGroupVersionKind(f.gvk)
	f.objects[client.ObjectKeyFromObject(obj)] = obj
}

// watch watches the feed's objects from where its list or its last event left them.
func (f *feed) watch(ctx context.Context, c client.WithWatch) (watch.Interface, error) {
	from := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: f.version, AllowWatchBookmarks: true}}
	w, err := c.Watch(ctx, f.newList(), append(f.opts, from)...)
	if err != nil {
		return nil, fmt.Errorf("watching %s on the hub: %w", f.kind, err)
	}
	return w, nil
}

// apply takes in a change a watch saw; it tells whether the feed's objects changed.
func (f *feed) apply(e watch.Event) (bool, error) {
	if e.Type == watch.Error {
		return false, fmt.Errorf("watching %s on the hub: %w", f.kind, apierrors.FromObject(e.Object))
	}
	obj, ok := e.Object.(client.Object)
	if !ok {
		return false, fmt.Errorf("watching %s on the hub: a %s event of %T", f.kind, e.Type, e.Object)
	}
	if v := obj.GetResourceVersion(); v != "" {
		f.version = v
	}
	switch e.Type {
	case watch.Added, watch.Modified:
		f.put(obj)
	case watch.Deleted:
		delete(f.objects, client.ObjectKeyFromObject(obj))
	default:
		return false, nil
	}
	return true, nil
}

// items are the objects of a feed of T, by namespace and name.
func items[T any, P interface {
	*T
	client.Object
}](f *feed) []T {
	out := make([]T, 0, len(f.objects))
	for _, obj := range sortedObjects(f) {
		out = append(out, *any(obj).(P))
	}
	return out
}

// sortedObjects are the objects of the feeds, each feed's by namespace and name.
func sortedObjects(feeds ...*feed) []client.Object {
	var out []client.Object
	for _, f := range feeds {
		keys := make([]types.NamespacedName, 0, len(f.objects))
		for k := range f.objects {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(a, b int) bool {
			if keys[a].Namespace != keys[b].Namespace {
				return keys[a].Namespace < keys[b].Namespace
			}
			return keys[a].Name < keys[b].Name
		})
		for _, k := range keys {
			out = append(out, f.objects[k])
		}
	}
	return out
}

// readAll reads the feeds, in order, until one fails.
func readAll(ctx context.Context, c client.Reader, feeds ...*feed) error {
	for _, f := range feeds {
		if err := f.read(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// listCommand is a command that reads a listing from the hub and prints it (printing), or with --watch
// prints it, then what changes. check, when given, refuses the command's own flags before the hub is
// read.
func listCommand(o *Options, use, short, example string, check func() error,
	read func(context.Context, client.Reader) (*listing, error)) *cobra.Command {
	p := newPrinting()
	var watching bool
	cmd := &cobra.Command{
		Use: use, Short: short, Example: example, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			printer, err := p.printer()
			if err == nil && check != nil {
				err = check()
			}
			if err != nil {
				return err
			}
			c, err := o.NewClient()
			if err != nil {
				return err
			}
			l, err := read(cmd.Context(), c)
			if err != nil {
				return err
			}
			if watching {
				return o.watch(cmd.Context(), c, l, p, printer)
			}
			return p.show(o.Out, printer, l.table(o.now()), l.listKind)
		},
	}
	p.addFlags(cmd)
	cmd.Flags().BoolVarP(&watching, "watch", "w", false,
		"After printing the list, print a row (or object) again each time something it shows changes, until stopped.")
	return cmd
}
