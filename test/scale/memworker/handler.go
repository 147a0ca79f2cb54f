package memworker

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
)

// handler answers the Kubernetes API of one server, in JSON whatever else the client accepts.
type handler struct {
	store   *store
	auth    *authenticator
	writes  *writeCounter
	host    string
	stopped <-chan struct{}
}

// request is one request on a resource.
type request struct {
	verb                 string
	res                  *resource
	namespace, name, sub string
}

func (rq *request) attributes() authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Namespace: rq.namespace, Verb: rq.verb, Group: rq.res.group,
		Resource: rq.res.name, Subresource: rq.sub, Name: rq.name}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, ok := h.auth.user(r)
	if !ok {
		writeError(w, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	if h.serveNonResource(w, r, u) {
		return
	}
	rq, err := parseRequest(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if _, mutating := mutatingVerbs[rq.verb]; mutating && !rq.res.review {
		resource := rq.res.name
		if rq.sub != "" {
			resource += "/" + rq.sub
		}
		h.writes.add(u.client, rq.verb, resource) // refused ones too, as the API server counts requests
	}
	if !u.allows(rq.attributes()) {
		writeError(w, apierrors.NewForbidden(rq.res.groupResource(), rq.name, fmt.Errorf("User %q cannot %s resource %q in API group %q in the namespace %q",
			u.name, rq.verb, rq.res.name, rq.res.group, rq.namespace)))
		return
	}
	h.serveResource(w, r, rq, u)
}

var mutatingVerbs = map[string]struct{}{"create": {}, "update": {}, "patch": {}, "delete": {}}

// parseRequest reads the resource, namespace, name, subresource and verb of a request path:
// /api/v1/..., /apis/<group>/<version>/..., then [namespaces/<ns>/]<resource>[/<name>[/<sub>]].
func parseRequest(r *http.Request) (*request, error) {
	notFound := apierrors.NewNotFound(schema.GroupResource{}, "")
	notFound.ErrStatus.Message = "the server could not find the requested resource"
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var group, version string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, version, parts = parts[1], parts[2], parts[3:]
	default:
		return nil, notFound
	}
	rq := &request{}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		if res := lookup(group, version, parts[2]); res != nil && res.namespaced {
			rq.namespace, parts = parts[1], parts[2:]
		}
	}
	if rq.res = lookup(group, version, parts[0]); rq.res == nil || len(parts) > 3 {
		return nil, notFound
	}
	if len(parts) > 1 {
		rq.name = parts[1]
	}
	if len(parts) > 2 {
		if rq.sub = parts[2]; rq.sub != "status" || !rq.res.status {
			return nil, notFound
		}
	}
	rq.verb = verbOf(r, rq.name)
	return rq, nil
}

func verbOf(r *http.Request, name string) string {
	switch r.Method {
	case http.MethodGet:
		if name != "" {
			return "get"
		}
		if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
			return "watch"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}

func (h *handler) serveResource(w http.ResponseWriter, r *http.Request, rq *request, u *user) {
	var o *object
	var err error
	code := http.StatusOK
	switch {
	case rq.res.review && rq.verb == "create" && rq.name == "":
		h.serveReview(w, r, rq, u)
		return
	case rq.res.review:
		err = apierrors.NewMethodNotSupported(rq.res.groupResource(), rq.verb)
	case rq.verb == "get":
		o, err = h.store.get(rq.res, rq.namespace, rq.name)
	case rq.verb == "list":
		h.serveList(w, r, rq)
		return
	case rq.verb == "watch":
		h.serveWatch(w, r, rq)
		return
	case rq.verb == "create" && rq.name == "" && rq.sub == "":
		var obj *unstructured.Unstructured
		if obj, err = decodeObject(r, rq.res); err == nil {
			o, err = h.store.create(rq.res, rq.namespace, obj)
			code = http.StatusCreated
		}
	case rq.verb == "update":
		var obj *unstructured.Unstructured
		if obj, err = decodeObject(r, rq.res); err == nil {
			o, err = h.store.update(rq.res, rq.namespace, rq.name, rq.sub, obj)
		}
	case rq.verb == "patch":
		o, err = h.patch(r, rq)
	case rq.verb == "delete" && rq.sub == "":
		var opts *metav1.DeleteOptions
		if opts, err = decodeDeleteOptions(r); err == nil {
			o, err = h.store.delete(rq.res, rq.namespace, rq.name, opts)
		}
	default:
		err = apierrors.NewMethodNotSupported(rq.res.groupResource(), rq.verb)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeRaw(w, code, o.raw)
}

// patch takes JSON merge patches, the only kind the hub, the agent and the harness send.
func (h *handler) patch(r *http.Request, rq *request) (*object, error) {
	if mt := mediaType(r); mt != string(types.MergePatchType) {
		return nil, unsupportedMediaType(mt + " (this server takes " + string(types.MergePatchType) + " patches only)")
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	return h.store.patch(rq.res, rq.namespace, rq.name, rq.sub, body)
}

func (h *handler) serveList(w http.ResponseWriter, r *http.Request, rq *request) {
	q := r.URL.Query()
	sel, err := parseSelectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		writeError(w, err)
		return
	}
	objs, rv := h.store.list(rq.res, rq.namespace, sel)
	if q.Get("resourceVersionMatch") == string(metav1.ResourceVersionMatchExact) && q.Get("resourceVersion") != strconv.FormatUint(rv, 10) {
		writeError(w, apierrors.NewResourceExpired("this server lists only at its current resource version"))
		return
	}
	writeRaw(w, http.StatusOK, encodeList(rq.res, objs, rv))
}

func parseSelectors(labelSelector, fieldSelector string) (func(*object) bool, error) {
	ls, err := labels.Parse(labelSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(fieldSelector)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return selects(ls, fs)
}

// selects is the filter of a label and a field selector (nil selects all). Of fields, an object's name
// and namespace are known.
func selects(ls labels.Selector, fs fields.Selector) (func(*object) bool, error) {
	if ls == nil {
		ls = labels.Everything()
	}
	if fs == nil {
		fs = fields.Everything()
	}
	for _, req := range fs.Requirements() {
		if req.Field != "metadata.name" && req.Field != "metadata.namespace" {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return func(o *object) bool {
		return ls.Matches(labels.Set(o.labels)) && fs.Matches(fields.Set{"metadata.name": o.name, "metadata.namespace": o.namespace})
	}, nil
}

// serveWatch streams a watch until its client leaves, its timeout passes, the server stops or it
// trails too far.
func (h *handler) serveWatch(w http.ResponseWriter, r *http.Request, rq *request) {
	q := r.URL.Query()
	sel, err := parseSelectors(q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		writeError(w, err)
		return
	}
	req := watchRequest{res: rq.res, namespace: rq.namespace, selects: sel, rv: q.Get("resourceVersion"), bookmarks: q.Get("allowWatchBookmarks") == "true"}
	if v := q.Get("sendInitialEvents"); v != "" {
		send := v == "true"
		req.sendInitialEvents = &send
	}
	watcher, first, err := h.store.watch(req)
	if err != nil && !apierrors.IsResourceExpired(err) {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	if err != nil { // the version is too old: said in the stream, as the API server says it
		_, _ = w.Write(frame("ERROR", statusJSON(err)))
		flush()
		return
	}
	defer h.store.unwatch(watcher)
	for _, f := range first {
		_, _ = w.Write(f)
	}
	flush()
	timeout := time.Duration(1<<62 - 1)
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	end := time.NewTimer(timeout)
	defer end.Stop()
	for {
		select {
		case f, open := <-watcher.frames:
			if !open {
				return
			}
			_, _ = w.Write(f)
			if len(watcher.frames) == 0 { // a burst goes out in one write
				flush()
			}
		case <-r.Context().Done():
			return
		case <-end.C:
			return
		case <-h.stopped:
			return
		}
	}
}

// serveReview answers the hub's access reviews from the rules the user holds here.
func (h *handler) serveReview(w http.ResponseWriter, r *http.Request, rq *request, u *user) {
	body, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var out runtime.Object
	switch rq.res.kind {
	case "SelfSubjectRulesReview":
		review := &authorizationv1.SelfSubjectRulesReview{}
		err = decodeTyped(body, mediaType(r), review)
		review.Status = u.rulesReview(review.Spec.Namespace)
		out = review
	default:
		review := &authorizationv1.SelfSubjectAccessReview{}
		err = decodeTyped(body, mediaType(r), review)
		if a := review.Spec.ResourceAttributes; a != nil {
			review.Status.Allowed = u.allows(*a)
		} else if a := review.Spec.NonResourceAttributes; a != nil {
			review.Status.Allowed = u.allowsPath(a.Verb, a.Path)
		}
		out = review
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out.GetObjectKind().SetGroupVersionKind(rq.res.groupVersionKind())
	writeJSON(w, http.StatusCreated, out)
}

// serveNonResource answers health, version and discovery; false when the path is none of them.
func (h *handler) serveNonResource(w http.ResponseWriter, r *http.Request, u *user) bool {
	path := r.URL.Path
	body, found, isNonResource := h.discovery(path)
	health := path == "/healthz" || path == "/readyz" || path == "/livez"
	if !isNonResource && !health {
		return false
	}
	switch {
	case r.Method != http.MethodGet:
		writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
	case !u.allowsPath("get", path):
		writeError(w, apierrors.NewForbidden(schema.GroupResource{}, "", fmt.Errorf("User %q cannot get path %q", u.name, path)))
	case health:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	case !found:
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, path))
	case !acceptsPlainJSON(r):
		writeError(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable,
			Reason: metav1.StatusReasonNotAcceptable, Message: "this server answers discovery in plain application/json only"}})
	default:
		writeJSON(w, http.StatusOK, body)
	}
	return true
}

// discovery is the document of a version or discovery path. Discovery is answered in its plain JSON
// form only, which clients that ask for the aggregated one accept too.
func (h *handler) discovery(path string) (doc any, found, isDiscovery bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/version" || path == "/version/":
		return &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-memworker", Platform: "linux/amd64"}, true, true
	case path == "/api" || path == "/api/":
		return &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: h.host}}}, true, true
	case path == "/apis" || path == "/apis/":
		return groupList(), true, true
	case len(parts) == 2 && parts[0] == "api":
		list, ok := resourceList(schema.GroupVersion{Version: parts[1]})
		return list, ok, true
	case len(parts) == 2 && parts[0] == "apis":
		g, ok := group(parts[1])
		return g, ok, true
	case len(parts) == 3 && parts[0] == "apis":
		list, ok := resourceList(schema.GroupVersion{Group: parts[1], Version: parts[2]})
		return list, ok, true
	}
	return nil, false, false
}
