package endpoint

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// statusError is an answer other than 200, with the message the user reads.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func fail(code int, format string, args ...any) *statusError {
	return &statusError{code: code, msg: fmt.Sprintf(format, args...)}
}

// logRequest is what GET /logs/{namespace}/{job} asks for.
type logRequest struct {
	Namespace string
	// Job is the job's name and, when the request says, its kind.
	Job               view.JobRef
	Follow            bool
	PodSet, Container string
	// TailLines is how many of the last lines of each log to show; nil shows all.
	TailLines *int64
}

// The query parameters of GET /logs; any other is refused, so that a misspelt one is not ignored.
const (
	paramKind      = "kind"
	paramFollow    = "follow"
	paramPodSet    = "podSet"
	paramContainer = "container"
	paramTailLines = "tailLines"
)

var logParams = []string{paramKind, paramFollow, paramPodSet, paramContainer, paramTailLines}

// parseLogRequest checks the path and query of a log request.
func parseLogRequest(namespace, job string, q url.Values) (logRequest, error) {
	req := logRequest{Namespace: namespace, Job: view.JobRef{Name: job}}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return req, fail(http.StatusBadRequest, "namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(job); len(errs) > 0 {
		return req, fail(http.StatusBadRequest, "job name %q: %s", job, strings.Join(errs, "; "))
	}
	for key, values := range q {
		if !slices.Contains(logParams, key) {
			return req, fail(http.StatusBadRequest, "unknown query parameter %q: the endpoint takes %s", key, strings.Join(logParams, ", "))
		}
		if len(values) > 1 {
			return req, fail(http.StatusBadRequest, "query parameter %q given %d times", key, len(values))
		}
	}
	if v := q.Get(paramKind); v != "" {
		k, ok := view.KindNamed(v)
		if !ok {
			return req, fail(http.StatusBadRequest, "%s=%q is not a kind of job Gantry dispatches", paramKind, v)
		}
		req.Job.Kind = k
	}
	if v := q.Get(paramFollow); v != "" {
		follow, err := strconv.ParseBool(v)
		if err != nil {
			return req, fail(http.StatusBadRequest, "%s=%q: want true or false", paramFollow, v)
		}
		req.Follow = follow
	}
	if v := q.Get(paramTailLines); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return req, fail(http.StatusBadRequest, "%s=%q: want a number of lines, 0 or more", paramTailLines, v)
		}
		req.TailLines = &n
	}
	req.PodSet, req.Container = q.Get(paramPodSet), q.Get(paramContainer)
	if errs := validation.IsDNS1123Label(req.Container); req.Container != "" && len(errs) > 0 {
		return req, fail(http.StatusBadRequest, "%s=%q: %s", paramContainer, req.Container, strings.Join(errs, "; "))
	}
	return req, nil
}

// winner is the cluster the job runs on, or why it runs nowhere yet: "pending: <reason>".
func winner(wl *gantry.Workload) (string, error) {
	if wl.Status.Winner() != "" {
		return wl.Status.Winner(), nil
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
		return "", fail(http.StatusConflict, "finished without running anywhere: %s", reasonAndMessage(c))
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); c != nil && c.Status == metav1.ConditionTrue {
		return "", fail(http.StatusConflict, "pending: %s", reasonAndMessage(c))
	}
	return "", fail(http.StatusConflict, "pending: not dispatched yet")
}

func reasonAndMessage(c *metav1.Condition) string {
	if c.Message == "" {
		return c.Reason
	}
	return c.Reason + ": " + c.Message
}

// checkPodSet makes sure the pod set asked for is the Workload's.
func checkPodSet(wl *gantry.Workload, name string) error {
	var names []string
	for _, ps := range wl.Spec.PodSets {
		names = append(names, ps.Name)
	}
	if name != "" && !slices.Contains(names, name) {
		return fail(http.StatusNotFound, "job %s has no pod set %q; its pod sets: %s", wl.Labels[gantry.JobNameLabel], name, strings.Join(names, ", "))
	}
	return nil
}

// podSelector selects the pods Gantry's job for the Workload has on its worker, whatever its kind: every
// pod of it, and only those, carries the Workload's UID (a job of the same name that Gantry did not
// create has other pods). Each also names its pod set, which selects the pods of one; a Workload of one
// pod set needs no such label, so pods labelled before pod sets were are found too.
func podSelector(wl *gantry.Workload, podSet string) labels.Selector {
	set := labels.Set{gantry.WorkloadUIDLabel: string(wl.UID)}
	if podSet != "" && len(wl.Spec.PodSets) > 1 {
		set[gantry.PodSetLabel] = podSet
	}
	return labels.SelectorFromSet(set)
}

// target is one container's log.
type target struct {
	Pod, Container string
}

// prefix starts each line of the target's log.
func (t target) prefix() string { return "[" + t.Pod + "/" + t.Container + "] " }

// targets lists the logs to show, by pod name, each pod's containers in their order: all of them, or
// the one named (which may be an init container). Pods without it are left out; none with it is an error.
func targets(pods []corev1.Pod, container string) ([]target, error) {
	sorted := slices.Clone(pods)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []target
	names := map[string]bool{}
	for _, p := range sorted {
		for _, c := range p.Spec.Containers {
			names[c.Name] = true
			if container == "" || c.Name == container {
				out = append(out, target{Pod: p.Name, Container: c.Name})
			}
		}
		for _, c := range p.Spec.InitContainers {
			if container != "" && c.Name == container {
				out = append(out, target{Pod: p.Name, Container: c.Name})
			}
		}
	}
	if len(out) == 0 && container != "" {
		return nil, fail(http.StatusNotFound, "no pod of the job has a container %q; its containers: %s",
			container, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
	}
	return out, nil
}

// bounded keeps what one request may stream: all targets, read at most max at a time, unless they are
// followed, which never ends: then the first max, and how many were left out.
func bounded(ts []target, follow bool, max int) ([]target, int) {
	if !follow || len(ts) <= max {
		return ts, 0
	}
	return ts[:max], len(ts) - max
}
