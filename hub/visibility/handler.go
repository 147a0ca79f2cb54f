package visibility

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
)

// Paths the handler serves, under the endpoint's mux.
const (
	NamespacePath   = "GET /apis/visibility.gantry.dev/v1beta1/namespaces/{namespace}/pendingworkloads"
	GlobalQueuePath = "GET /apis/visibility.gantry.dev/v1beta1/globalqueues/{name}/pendingworkloads"
)

// Page sizes: DefaultLimit when a request names none, MaxLimit at most.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Handler answers the visibility API from an Index. Allowed asks whether the request's user may do
// what the attributes say (endpoint.Authorizer). WhatIf, when set, answers what-if requests.
type Handler struct {
	Index   *Index
	Allowed func(context.Context, authorizationv1.ResourceAttributes) (bool, error)
	WhatIf  *WhatIf
}

// Register adds the handler's paths to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc(NamespacePath, h.namespace)
	mux.HandleFunc(GlobalQueuePath, h.globalQueue)
	if h.WhatIf != nil {
		h.WhatIf.Register(mux)
	}
}

// namespace answers a namespace's pending Workloads, of one Queue when the request names it.
func (h *Handler) namespace(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("namespace")
	offset, limit, err := paging(r.URL.Query(), "queue")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !h.may(w, r, ns) {
		return
	}
	p := h.Index.positions()
	indexes := p.byNamespace[ns]
	if q := r.URL.Query().Get("queue"); q != "" {
		indexes = p.byQueue[queueRef{ns, q}]
	}
	// The page is cut from the indexes first: only its own Workloads are copied.
	shown, rest := page(indexes, offset, limit)
	write(w, p, p.pick(shown), offset, rest)
}

// globalQueue answers a GlobalQueue's pending Workloads, of every namespace.
func (h *Handler) globalQueue(w http.ResponseWriter, r *http.Request) {
	offset, limit, err := paging(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !h.may(w, r, "") {
		return
	}
	p := h.Index.positions()
	shown, rest := page(p.byGlobalQueue[r.PathValue("name")], offset, limit)
	write(w, p, shown, offset, rest)
}

// may checks the user's right to list Workloads in the namespace ("" for every namespace), and answers
// the refusal itself.
func (h *Handler) may(w http.ResponseWriter, r *http.Request, namespace string) bool {
	ok, err := h.Allowed(r.Context(), authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "list",
		Group: gantry.GroupVersion.Group, Resource: "workloads"})
	where := "in namespace " + namespace
	if namespace == "" {
		where = "in every namespace"
	}
	switch {
	case err != nil:
		ctrllog.FromContext(r.Context()).Error(err, "Reviewing access failed")
		http.Error(w, "the hub could not review your access with its API server; try again", http.StatusServiceUnavailable)
	case !ok:
		http.Error(w, "you may not list workloads.gantry.dev "+where+" on the hub", http.StatusForbidden)
	}
	return err == nil && ok
}

// paging reads limit and continue; any query parameter but those and the extra ones named is refused,
// so that a misspelt one is not ignored.
func paging(q url.Values, extra ...string) (offset, limit int, err error) {
	for k := range q {
		if k != "limit" && k != "continue" && !slices.Contains(extra, k) {
			return 0, 0, fmt.Errorf("unknown query parameter %q", k)
		}
	}
	limit = DefaultLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxLimit {
			return 0, 0, fmt.Errorf("limit %q: want a number from 1 to %d", v, MaxLimit)
		}
	}
	if v := q.Get("continue"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, fmt.Errorf("continue %q: not a token this endpoint gave", v)
		}
	}
	return offset, limit, nil
}

// write answers the page of items that starts at offset, rest more after it, as a PendingWorkloadList.
// Its continue token is where the next page starts: positions may move between two pages as Workloads
// come and go.
func write(w http.ResponseWriter, p *positions, items []placed, offset, rest int) {
	out := visibility.PendingWorkloadList{
		TypeMeta: metav1.TypeMeta{APIVersion: visibility.Group + "/" + visibility.Version, Kind: visibility.PendingWorkloadListKind},
		Items:    make([]visibility.PendingWorkload, 0, len(items)),
	}
	if rest > 0 {
		out.Continue = strconv.Itoa(offset + len(items))
		out.RemainingItemCount = ptr.To(int64(rest))
	}
	for _, pl := range items {
		out.Items = append(out.Items, visibility.PendingWorkload{
			ObjectMeta: metav1.ObjectMeta{Namespace: pl.key.Namespace, Name: pl.key.Name, CreationTimestamp: metav1.NewTime(pl.created)},
			Queue:      pl.queue, GlobalQueue: pl.globalQueue, Priority: pl.priority,
			PositionInGlobalQueue: pl.inGlobal, PositionInQueue: pl.inQueue, PendingInGlobalQueue: len(p.byGlobalQueue[pl.globalQueue]),
			Reason: pl.reason, Message: pl.message,
		})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
