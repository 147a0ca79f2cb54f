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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
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
	Namespace, Job    string
	Follow            bool
	PodSet, Container string
	// TailLines is how many of the last lines of each log to show; nil shows all.
	TailLines *int64
}

// The query parameters of GET /logs; any other is refused, so that a misspelt one is not ignored.
const (
	paramFollow    = "follow"
	paramPodSet    = "podSet"
	paramContainer = "container"
	paramTailLines = "tailLines"
)

// parseLogRequest checks the path and query of a log request.
func parseLogRequest(namespace, job string, q url.Values) (logRequest, error) {
	req := logRequest{Namespace: namespace, Job: job}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return req, fail(http.StatusBadRequest, "namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(job); len(errs) > 0 {
		return req, fail(http.StatusBadRequest, "job name %q: %s", job, strings.Join(errs, "; "))
	}
	for key, values := range q {
		if !slices.Contains([]string{paramFollow, paramPodSet, paramContainer, paramTailLines}, key) {
			return req, fail(http.StatusBadRequest, "unknown query parameter %q: the endpoint takes %s, %s, %s and %s",
				key, paramFollow, paramPodSet, paramContainer, paramTailLines)
		}
		if len(values) > 1 {
			return req, fail(http.StatusBadRequest, "query parameter %q given %d times", key, len(values))
		}
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

// pickWorkload is the Workload of the Job among those labelled with its name: the one not being
// deleted, else the newest. A Job resubmitted under its name gets its Workload once the old one is gone,
// so two live ones are not expected.
func pickWorkload(wls []gantry.Workload) *gantry.Workload {
	var pick *gantry.Workload
	for i := range wls {
		wl := &wls[i]
		switch {
		case pick == nil:
			pick = wl
		case (pick.DeletionTimestamp == nil) != (wl.DeletionTimestamp == nil):
			if wl.DeletionTimestamp == nil {
				pick = wl
			}
		case pick.CreationTimestamp.Before(&wl.CreationTimestamp):
			pick = wl
		}
	}
	return pick
}

// winner is the cluster the job runs on, or why it runs nowhere yet: "pending: <reason>".
func winner(wl *gantry.Workload) (string, error) {
	if wl.Status.ClusterName != "" {
		return wl.Status.ClusterName, nil
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

// checkPodSet makes sure the pod set asked for is the Workload's. A Job has one pod set, so all its pods
// are of it; a Workload of several would need its pods to say which is theirs.
func checkPodSet(wl *gantry.Workload, name string) error {
	var names []string
	for _, ps := range wl.Spec.PodSets {
		names = append(names, ps.Name)
	}
	if name != "" && !slices.Contains(names, name) {
		return fail(http.StatusNotFound, "job %s has no pod set %q; its pod sets: %s", wl.Labels[gantry.JobNameLabel], name, strings.Join(names, ", "))
	}
	if len(names) > 1 {
		return fail(http.StatusNotImplemented, "job %s has %d pod sets, and nothing on its pods says which is theirs", wl.Labels[gantry.JobNameLabel], len(names))
	}
	return nil
}

// podSelector selects the pods of the Job that Gantry created for the Workload on its worker: a Job of
// the same name that Gantry did not create has other pods.
func podSelector(job string, wl *gantry.Workload) labels.Selector {
	return labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: job, gantry.WorkloadUIDLabel: string(wl.UID)})
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
