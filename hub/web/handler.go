package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
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
	Cache   client.Reader
	Allowed Access
	Changes *Changes
	Now     func() time.Time
}

//go:embed assets templates
var files embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{"age": age, "jobPath": jobPath}).ParseFS(files, "templates/*.html"))

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
	o, err := h.readOverview(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, r, tmpl, page{Title: "Gantry fleet", Main: "overview", Data: o})
}

func (h *Handler) readOverview(ctx context.Context) (Overview, error) {
	s, err := h.snapshot(ctx)
	if err != nil {
		return Overview{}, err
	}
	showClusters, err := h.Allowed(ctx, authorizationv1.ResourceAttributes{Verb: "list", Group: gantry.GroupVersion.Group, Resource: "workerclusters"})
	if err != nil {
		return Overview{}, err
	}
	showQueues, err := h.Allowed(ctx, authorizationv1.ResourceAttributes{Verb: "list", Group: gantry.GroupVersion.Group, Resource: "globalqueues"})
	if err != nil {
		return Overview{}, err
	}
	visible, err := h.visibleJobs(ctx, s.Workloads)
	if err != nil {
		return Overview{}, err
	}
	return BuildOverview(s, visible, showClusters, showQueues, h.Now()), nil
}

// visibleJobs says of each workload whether the user may list the jobs of its kind in its namespace
// (jobs.batch, jobsets.jobset.x-k8s.io, ...): asked once per kind for all namespaces, and per namespace
// only for a kind the user may not list everywhere.
func (h *Handler) visibleJobs(ctx context.Context, wls []gantry.Workload) (func(*gantry.Workload) bool, error) {
	everywhere := map[gantry.JobKind]bool{}
	visible := map[string]bool{}
	key := func(k jobkind.Kind, ns string) string { return string(k.Name()) + "/" + ns }
	for i := range wls {
		k, ns := jobkind.Of(&wls[i]), wls[i].Namespace
		all, asked := everywhere[k.Name()]
		if !asked {
			var err error
			if all, err = h.Allowed(ctx, view.JobAccess("list", k, "", "")); err != nil {
				return nil, err
			}
			everywhere[k.Name()] = all
		}
		if _, asked := visible[key(k, ns)]; asked {
			continue
		}
		ok := all
		if !all {
			var err error
			if ok, err = h.Allowed(ctx, view.JobAccess("list", k, ns, "")); err != nil {
				return nil, err
			}
		}
		visible[key(k, ns)] = ok
	}
	return func(wl *gantry.Workload) bool { return visible[key(jobkind.Of(wl), wl.Namespace)] }, nil
}

func (h *Handler) snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	var wcs gantry.WorkerClusterList
	var gqs gantry.GlobalQueueList
	var qs gantry.QueueList
	var wls gantry.WorkloadList
	for _, l := range []client.ObjectList{&wcs, &gqs, &qs, &wls} {
		// The cache's own objects, not copies: the page only reads them, and copying every Workload on
		// every refresh of every open page would cost more than rendering it.
		if err := h.Cache.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return s, fmt.Errorf("reading the hub's cache: %w", err)
		}
	}
	return Snapshot{Clusters: wcs.Items, GlobalQueues: gqs.Items, Queues: qs.Items, Workloads: wls.Items}, nil
}

// jobPage is a job's story.
type jobPage struct {
	Namespace, Name string
	Kind            gantry.JobKind
	Story           []string
}

// jobPath is the page of the job of a row.
func jobPath(r view.WorkloadRow) string {
	return "/jobs/" + url.PathEscape(r.Namespace) + "/" + jobkind.Ref(r.Kind) + "/" + url.PathEscape(r.Name)
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

func (h *Handler) render(w http.ResponseWriter, r *http.Request, tmpl string, p page) {
	var buf strings.Builder
	if err := templates.ExecuteTemplate(&buf, tmpl, p); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(buf.String()))
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
