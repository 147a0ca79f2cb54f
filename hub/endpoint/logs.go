package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// Workers reaches the pods of worker clusters; *remote.PodLogs is the real one.
type Workers interface {
	// Pods returns read access to the pods of the named WorkerCluster, or why there is none.
	Pods(ctx context.Context, cluster string) (remote.Pods, error)
}

// OmittedHeader counts the pods' containers a followed request leaves out, beyond MaxStreams.
const OmittedHeader = "Gantry-Logs-Omitted"

// Logs serves GET /logs/{namespace}/{job}: the logs of the job's pods on the worker it runs on, each
// line prefixed "[pod/container] ", merged line by line; ?kind= names the job's kind (JobSet) when jobs
// of several kinds have the name. It runs behind Authenticate.
type Logs struct {
	// Hub reads the hub's Workloads.
	Hub client.Reader
	// Allowed asks the hub's authorizer about the request's user (Authorizer).
	Allowed func(context.Context, authorizationv1.ResourceAttributes) (bool, error)
	Workers Workers
	// MaxStreams bounds the logs one request reads at once; MaxTotal those of all requests together.
	MaxStreams, MaxTotal int

	mu     sync.Mutex
	active int
}

// ServeHTTP answers with the logs, or with the status and message of why not, before anything streams.
func (l *Logs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := parseLogRequest(r.PathValue("namespace"), r.PathValue("job"), r.URL.Query())
	if err == nil {
		err = l.mayReadLogs(ctx, req.Namespace)
	}
	var sources []source
	omitted := 0
	if err == nil {
		sources, omitted, err = l.sources(ctx, req)
	}
	n := min(len(sources), l.MaxStreams)
	if err == nil && !l.take(n) {
		err = fail(http.StatusTooManyRequests, "the hub reads at most %d logs at once for all users; try again shortly", l.MaxTotal)
	}
	if err != nil {
		answer(ctx, w, err)
		return
	}
	defer l.give(n)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if omitted > 0 {
		w.Header().Set(OmittedHeader, strconv.Itoa(omitted))
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The status goes out at once: a followed log may be quiet for long.
	_ = rc.Flush()
	merge(ctx, w, func() { _ = rc.Flush() }, sources, l.MaxStreams)
	u, _ := UserFrom(ctx)
	ctrllog.FromContext(ctx).V(1).Info("Served logs", "user", u.Username, "namespace", req.Namespace, "job", req.Job.String(),
		"logs", len(sources), "follow", req.Follow)
}

// mayReadLogs is the user's right to read pod logs in the namespace on the hub: whoever may read them
// there may read them wherever the namespace's jobs run. It is asked before anything is read.
func (l *Logs) mayReadLogs(ctx context.Context, namespace string) error {
	return l.check(ctx, authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "pods", Subresource: "log"},
		"pods/log in namespace "+namespace)
}

// mayGetJob is the user's right to get the job on the hub, as its kind is (jobs.batch,
// jobsets.jobset.x-k8s.io, ...): the logs are the job's, so whoever may not read it sees none.
func (l *Logs) mayGetJob(ctx context.Context, k jobkind.Kind, namespace, name string) error {
	return l.check(ctx, view.JobAccess("get", k, namespace, name),
		fmt.Sprintf("%s %s in namespace %s", view.JobResource(k), name, namespace))
}

// check asks the hub's authorizer; what says what was asked, in the refusal.
func (l *Logs) check(ctx context.Context, attrs authorizationv1.ResourceAttributes, what string) error {
	ok, err := l.Allowed(ctx, attrs)
	if err != nil {
		ctrllog.FromContext(ctx).Error(err, "Reviewing access failed")
		return fail(http.StatusServiceUnavailable, "the hub could not review your access with its API server; try again")
	}
	if !ok {
		u, _ := UserFrom(ctx)
		return fail(http.StatusForbidden, "%s may not get %s on the hub", u.Username, what)
	}
	return nil
}

// workload is the Workload of the requested job on the hub, once the user may get the job.
func (l *Logs) workload(ctx context.Context, req logRequest) (*gantry.Workload, error) {
	var wls gantry.WorkloadList
	if err := l.Hub.List(ctx, &wls, client.InNamespace(req.Namespace), client.MatchingLabels{gantry.JobNameLabel: req.Job.Name}); err != nil {
		return nil, fail(http.StatusServiceUnavailable, "reading the job's Workload on the hub: %v", err)
	}
	wl, err := view.PickWorkload(req.Namespace, req.Job, wls.Items)
	switch {
	case err != nil:
		return nil, fail(http.StatusConflict, "%v", err)
	case wl == nil:
		return nil, fail(http.StatusNotFound, "no Workload for job %s in namespace %s on the hub: the job does not exist, or is not queued (label %s)",
			req.Job, req.Namespace, gantry.QueueLabel)
	}
	if err := l.mayGetJob(ctx, jobkind.Of(wl), req.Namespace, req.Job.Name); err != nil {
		return nil, err
	}
	return wl, nil
}

// sources finds the job's Workload on the hub, its winner, and there the job's pods and their logs.
func (l *Logs) sources(ctx context.Context, req logRequest) ([]source, int, error) {
	wl, err := l.workload(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	cluster, err := winner(wl)
	if err != nil {
		return nil, 0, err
	}
	if err := checkPodSet(wl, req.PodSet); err != nil {
		return nil, 0, err
	}
	pods, err := l.Workers.Pods(ctx, cluster)
	if err != nil {
		return nil, 0, fail(http.StatusServiceUnavailable, "the job runs on %s, which the hub cannot reach for logs: %v", cluster, err)
	}
	list, err := pods.List(ctx, req.Namespace, podSelector(wl, req.PodSet))
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return nil, 0, fail(http.StatusBadGateway, "%s does not let the hub list the job's pods (its ClusterRole gantry-hub-remote-logs is missing: install the current chart there): %v", cluster, err)
	case err != nil:
		return nil, 0, fail(http.StatusBadGateway, "listing the job's pods on %s: %v", cluster, err)
	case len(list) == 0:
		return nil, 0, fail(http.StatusNotFound, "the job has no pods on %s yet", cluster)
	}
	ts, err := targets(list, req.Container)
	if err != nil {
		return nil, 0, err
	}
	ts, omitted := bounded(ts, req.Follow, l.MaxStreams)
	sources := make([]source, 0, len(ts))
	for _, t := range ts {
		opts := &corev1.PodLogOptions{Container: t.Container, Follow: req.Follow, TailLines: req.TailLines}
		sources = append(sources, source{prefix: t.prefix(), open: func(ctx context.Context) (io.ReadCloser, error) {
			return pods.Log(ctx, req.Namespace, t.Pod, opts)
		}})
	}
	return sources, omitted, nil
}

// take reserves n streams of MaxTotal, all or none.
func (l *Logs) take(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active+n > l.MaxTotal {
		return false
	}
	l.active += n
	return true
}

func (l *Logs) give(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active -= n
}

// answer writes an error as its status and message.
func answer(ctx context.Context, w http.ResponseWriter, err error) {
	var se *statusError
	if !errors.As(err, &se) {
		se = fail(http.StatusInternalServerError, "%v", err)
	}
	if se.code >= 500 {
		ctrllog.FromContext(ctx).Info("Log request failed", "code", se.code, "message", se.msg)
	}
	http.Error(w, se.msg, se.code)
}
