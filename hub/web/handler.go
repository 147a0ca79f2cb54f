package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/facts"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// Access asks the hub's authorizer whether the request's user may do what attrs say.
type Access func(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error)

// Handler serves the page. Every request must carry an authenticated user, which Allowed checks.
type Handler struct {
	// Cache is the hub's cache; the page reads nothing else.
	Cache client.Reader
	// Table follows the Workloads of Cache.
	Table   *Table
	Allowed Access
	Changes *Changes
	Now     func() time.Time
}

//go:embed assets templates
var files embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{"age": age, "jobPath": jobPath, "logsPath": logsPath}).
	ParseFS(files, "templates/*.html"))

// Routes are the page's: the overview, a job's page, their parts for live updates, the change events
// and the static assets. A job's page is /jobs/NAMESPACE/KIND/NAME (KIND as kubectl gantry takes it:
// jobset); /jobs/NAMESPACE/NAME is a batch Job's.
func (h *Handler) Routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { h.overview(w, r, "page") })
	mux.HandleFunc("GET /fragment/{$}", func(w http.ResponseWriter, r *http.Request) { h.overview(w, r, "overview") })
	for _, path := range []string{"/jobs/{namespace}/{name}", "/jobs/{namespace}/{kind}/{name}"} {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { h.job(w, r, "page") })
		mux.HandleFunc("GET /fragment"+path, func(w http.ResponseWriter, r *http.Request) { h.job(w, r, "job") })
	}
	mux.HandleFunc("GET /events", h.events)
	assets, _ := fs.Sub(files, "assets")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(assets)))
	return mux
}

// page is what the layout renders: a title and the part named Main.
type page struct {
	Title string
	Main  string
	Data  any
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, tmpl string) {
	q, err := ParseQuery(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o, err := h.readOverview(r.Context(), q)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, tmpl, page{Title: "Gantry fleet", Main: "overview", Data: o})
}

func (h *Handler) readOverview(ctx context.Context, q Query) (Overview, error) {
	var f Fleet
	showClusters, err := h.Allowed(ctx, authorizationv1.ResourceAttributes{Verb: "list", Group: gantry.GroupVersion.Group, Resource: "workerclusters"})
	if err != nil {
		return Overview{}, err
	}
	showQueues, err := h.Allowed(ctx, authorizationv1.ResourceAttributes{Verb: "list", Group: gantry.GroupVersion.Group, Resource: "globalqueues"})
	if err != nil {
		return Overview{}, err
	}
	var wcs gantry.WorkerClusterList
	var gqs gantry.GlobalQueueList
	for _, l := range []client.ObjectList{&wcs, &gqs} {
		// The cache's own objects, not copies: the page only reads them.
		if err := h.Cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return Overview{}, fmt.Errorf("reading the hub's cache: %w", err)
		}
	}
	f.Clusters, f.GlobalQueues = wcs.Items, gqs.Items
	snap, now := h.Table.current(), h.Now()
	visible, failed := h.jobAccess(ctx)
	jobs := snap.Select(q, visible, now)
	if err := failed(); err != nil {
		return Overview{}, err
	}
	usage, err := h.readUsage(ctx, wcs.Items, now)
	if err != nil {
		return Overview{}, err
	}
	o := BuildOverview(f, jobs, q, snap.runningOn, showClusters, showQueues, now)
	o.Usage = usage
	return o, nil
}

// jobAccess says of each row whether the user may list the jobs of its kind in its namespace
// (jobs.batch, jobsets.jobset.x-k8s.io, ...): asked once per kind for all namespaces, and per namespace
// only for a kind the user may not list everywhere. failed is the error of the first question that
// could not be answered; every row after it is hidden.
func (h *Handler) jobAccess(ctx context.Context) (visible func(*Row) bool, failed func() error) {
	everywhere := map[gantry.JobKind]bool{}
	inNamespace := map[string]bool{}
	var err error
	ask := func(k jobkind.Kind, ns string) bool {
		var ok bool
		if err == nil {
			ok, err = h.Allowed(ctx, view.JobAccess("list", k, ns, ""))
		}
		return ok && err == nil
	}
	visible = func(r *Row) bool {
		k, known := jobkind.Named(r.Kind)
		if !known || err != nil {
			return false
		}
		all, asked := everywhere[r.Kind]
		if !asked {
			all = ask(k, "")
			everywhere[r.Kind] = all
		}
		if all {
			return true
		}
		key := string(r.Kind) + "/" + r.Namespace
		ok, asked := inNamespace[key]
		if !asked {
			ok = ask(k, r.Namespace)
			inNamespace[key] = ok
		}
		return ok
	}
	return visible, func() error { return err }
}

// jobPage is a job's story.
type jobPage struct {
	Namespace, Name string
	Kind            gantry.JobKind
	Story           []string
}

// jobPath is the page of the job of a row.
func jobPath(r placedRow) string {
	return "/jobs/" + url.PathEscape(r.Namespace) + "/" + jobkind.Ref(r.Kind) + "/" + url.PathEscape(r.Name)
}

// logsPath is where the endpoint serves the logs of the job of a row (what kubectl gantry logs reads).
func logsPath(r placedRow) string {
	return "/logs/" + url.PathEscape(r.Namespace) + "/" + url.PathEscape(r.Name) + "?kind=" + jobkind.Ref(r.Kind)
}

// job serves the page of the job the path names, to a user who may get that job.
func (h *Handler) job(w http.ResponseWriter, r *http.Request, tmpl string) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	kind, _ := jobkind.Named(gantry.JobKindJob)
	if k := r.PathValue("kind"); k != "" {
		var known bool
		if kind, known = view.KindNamed(k); !known {
			http.Error(w, fmt.Sprintf("%q is not a kind of job Gantry dispatches", k), http.StatusNotFound)
			return
		}
	}
	ok, err := h.Allowed(r.Context(), view.JobAccess("get", kind, ns, name))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !ok {
		http.Error(w, fmt.Sprintf("you may not get %s in namespace %s on the hub", view.JobResource(kind), ns), http.StatusForbidden)
		return
	}
	story, err := facts.Explain(r.Context(), withoutEvents{h.Cache}, ns, view.JobRef{Kind: kind, Name: name}, h.Now(), func(string) {})
	if err != nil {
		if notFound := (*facts.NotFoundError)(nil); errors.As(err, &notFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		h.fail(w, r, err)
		return
	}
	h.render(w, r, tmpl, page{Title: string(kind.Name()) + " " + ns + "/" + name, Main: "job",
		Data: jobPage{Namespace: ns, Name: name, Kind: kind.Name(), Story: story}})
}

// render writes the template, tagged with a hash of it: a page that refreshes sends the tag back and
// is answered 304 when nothing it shows changed. Compressed when the reader takes gzip.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, tmpl string, p page) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, tmpl, p); err != nil {
		h.fail(w, r, err)
		return
	}
	sum := fnv.New64a()
	_, _ = sum.Write(buf.Bytes())
	etag := fmt.Sprintf(`"%x"`, sum.Sum64())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("ETag", etag)
	w.Header().Set("Vary", "Accept-Encoding")
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		_, _ = w.Write(buf.Bytes())
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	gz := gzip.NewWriter(w)
	_, _ = gz.Write(buf.Bytes())
	_ = gz.Close()
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the reader went away
	}
	ctrllog.FromContext(r.Context()).Error(err, "Serving the page", "path", r.URL.Path)
	http.Error(w, "the hub could not serve the page: "+err.Error(), http.StatusInternalServerError)
}

func age(now, t time.Time) string { return duration.HumanDuration(now.Sub(t)) }

// withoutEvents reads the cache but no Events: the hub does not cache them, and a page must not make
// it watch every Event of the cluster. A job the hub refused is then told without its warnings.
type withoutEvents struct{ client.Reader }

func (r withoutEvents) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*eventsv1.EventList); ok {
		return apierrors.NewForbidden(eventsv1.Resource("events"), "", errors.New("the hub's page does not read events"))
	}
	return r.Reader.List(ctx, list, opts...)
}
