package visibility

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/dispatcher"
	"github.com/gantry-dev/gantry/hub/jobs"
	"github.com/gantry-dev/gantry/jobkind"
)

// WhatIfPath is where the endpoint answers what the dispatcher would do with a job submitted now.
const WhatIfPath = "POST /apis/visibility.gantry.dev/v1beta1/namespaces/{namespace}/whatif"

// MaxJobBytes bounds the job a what-if request may send, as the API server bounds a request's body.
const MaxJobBytes = 3 << 20

// Predictor says what the dispatcher would do with a Workload not yet created (dispatcher.Predictor).
type Predictor interface {
	Predict(ctx context.Context, wl *gantry.Workload) (*dispatcher.Answer, error)
}

// WhatIf answers what-if requests: it turns the job into the Workload the hub would make of it, as the
// hub's job controllers do, and has the Predictor run the dispatcher's decision with it added. Nothing
// is created.
type WhatIf struct {
	// Decoder decodes a job of any kind the hub dispatches, from YAML or JSON.
	Decoder runtime.Decoder
	// Hub reads what a job refers to (its PriorityClass, a TrainJob's runtime), from the hub's cache.
	Hub       client.Client
	Predictor Predictor
	Allowed   func(context.Context, authorizationv1.ResourceAttributes) (bool, error)
}

// Register adds the what-if path to mux.
func (h *WhatIf) Register(mux *http.ServeMux) { mux.HandleFunc(WhatIfPath, h.serve) }

// requestError is an answer other than 200: its status and what to tell the user.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func (h *WhatIf) serve(w http.ResponseWriter, r *http.Request) {
	out, err := h.answer(w, r)
	if err != nil {
		var re *requestError
		if !errors.As(err, &re) {
			ctrllog.FromContext(r.Context()).Error(err, "Answering a what-if request failed")
			re = &requestError{http.StatusServiceUnavailable, "the hub could not read its state: " + err.Error() + "; try again"}
		}
		http.Error(w, re.msg, re.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// answer decodes, authorizes and predicts; a *requestError is the user's to fix (or to be refused).
func (h *WhatIf) answer(w http.ResponseWriter, r *http.Request) (any, error) {
	ns := r.PathValue("namespace")
	if len(r.URL.Query()) > 0 {
		return nil, &requestError{http.StatusBadRequest, "a what-if request takes no query parameters"}
	}
	job, kind, err := h.decode(w, r, ns)
	if err != nil {
		return nil, err
	}
	if err := h.mayCreate(r.Context(), kind, ns); err != nil {
		return nil, err
	}
	wl, err := jobs.NewWorkload(r.Context(), h.Hub, kind, job)
	var invalid jobs.InvalidJobError
	switch {
	case errors.As(err, &invalid):
		return nil, &requestError{http.StatusUnprocessableEntity, "the hub would not dispatch this " + string(kind.Name()) + ": " + err.Error()}
	case err != nil:
		return nil, err
	}
	a, err := h.Predictor.Predict(r.Context(), wl)
	switch {
	case errors.Is(err, dispatcher.ErrSubmitted):
		return nil, &requestError{http.StatusConflict, fmt.Sprintf("%s %s/%s is submitted already: kubectl gantry explain %s %s -n %s says what became of it",
			kind.Name(), ns, job.GetName(), jobkind.Ref(kind.Name()), job.GetName(), ns)}
	case err != nil:
		return nil, err
	}
	return answerOf(job, kind, wl, a), nil
}

// decode reads the request's job: one object of a kind the hub dispatches, carrying the queue label,
// in the request's namespace.
func (h *WhatIf) decode(w http.ResponseWriter, r *http.Request, ns string) (client.Object, jobkind.Kind, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJobBytes))
	if err != nil {
		return nil, nil, &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("reading the job: %v (at most %d bytes)", err, MaxJobBytes)}
	}
	obj, _, err := h.Decoder.Decode(body, nil, nil)
	if err != nil {
		return nil, nil, &requestError{http.StatusBadRequest, "the body is not a job Gantry dispatches (a Job, JobSet, RayJob or TrainJob in YAML or JSON): " + err.Error()}
	}
	job, ok := obj.(client.Object)
	var kind jobkind.Kind
	if ok {
		kind, ok = jobkind.ForObject(job)
	}
	switch {
	case !ok:
		return nil, nil, &requestError{http.StatusBadRequest, fmt.Sprintf("a %s is not a kind of job Gantry dispatches (Job, JobSet, RayJob, TrainJob)", obj.GetObjectKind().GroupVersionKind().Kind)}
	case job.GetNamespace() != "" && job.GetNamespace() != ns:
		return nil, nil, &requestError{http.StatusBadRequest, fmt.Sprintf("the job names namespace %s, the request %s", job.GetNamespace(), ns)}
	case job.GetName() == "" && job.GetGenerateName() == "":
		return nil, nil, &requestError{http.StatusBadRequest, "the job has neither a name nor a generateName"}
	case job.GetLabels()[gantry.QueueLabel] == "":
		return nil, nil, &requestError{http.StatusUnprocessableEntity, "the job has no " + gantry.QueueLabel + " label: the hub would leave it to the hub cluster's own scheduler, not dispatch it"}
	}
	job.SetNamespace(ns)
	if job.GetName() == "" {
		job.SetName(job.GetGenerateName() + "whatif") // the name the API server would complete it to is not known yet
	}
	return job, kind, nil
}

// mayCreate checks the user's right to create jobs of the kind in the namespace: who may submit the
// job may ask what would become of it.
func (h *WhatIf) mayCreate(ctx context.Context, kind jobkind.Kind, ns string) error {
	gvr := kind.Resource()
	ok, err := h.Allowed(ctx, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: gvr.Group, Resource: gvr.Resource})
	switch {
	case err != nil:
		return fmt.Errorf("reviewing access: %w", err)
	case !ok:
		return &requestError{http.StatusForbidden, fmt.Sprintf("you may not create %s in namespace %s on the hub", gvr.GroupResource(), ns)}
	}
	return nil
}
