package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/test/e2e/testbed"
	"github.com/gantry-dev/gantry/test/scrape"
)

// reqKey is one kind of mutating request an API server counts in apiserver_request_total.
type reqKey struct {
	group, resource, subresource, verb string
	// failure is the response code of requests that failed (409 for conflicts and AlreadyExists, 404...);
	// empty for successful ones.
	failure string
}

func (k reqKey) String() string {
	s := k.resource
	if k.group != "" {
		s = k.group + "/" + s
	}
	if k.subresource != "" {
		s += "/" + k.subresource
	}
	s += " " + k.verb
	if k.failure != "" {
		s += " -> " + k.failure
	}
	return s
}

// requestCounts sums apiserver_request_total over response codes, per reqKey.
type requestCounts map[reqKey]float64

// mutatingVerbs are the verbs apiserver_request_total reports for writes (APPLY is server-side apply).
var mutatingVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// scrapeRequests reads the API server's mutating request counters from its /metrics.
func scrapeRequests(ctx context.Context, c *testbed.Cluster) (requestCounts, error) {
	raw, err := c.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics of %s: %w", c.Name, err)
	}
	m, err := scrape.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics of %s: %w", c.Name, err)
	}
	out := requestCounts{}
	m.Series("apiserver_request_total", func(labels map[string]string, v float64) {
		if !mutatingVerbs[labels["verb"]] || labels["dry_run"] != "" {
			return
		}
		k := reqKey{group: labels["group"], resource: labels["resource"], subresource: labels["subresource"], verb: labels["verb"]}
		if code := labels["code"]; !strings.HasPrefix(code, "2") {
			k.failure = code
		}
		out[k] += v
	})
	return out, nil
}

// sub returns after - before.
func sub(after, before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// Who a write is attributed to.
const (
	ownerGantry     = "gantry"
	ownerKubernetes = "kubernetes"
	ownerBench      = "bench"
	ownerEvents     = "events" // split between Gantry and Kubernetes by listing the Events
)

// owner attributes a kind of write to whoever makes it on the testbed. On the hub the Job controller
// leaves Gantry's Jobs alone (spec.managedBy), so every Job write there but the benchmark's own
// submissions and deletions is Gantry's. On workers Gantry creates and deletes the Jobs, its copies
// and namespaces; the Job controller, scheduler and kwok do the rest.
func owner(hub bool, k reqKey) string {
	switch {
	case k.group == "gantry.dev":
		return ownerGantry
	case k.resource == "events":
		return ownerEvents
	case k.group == "batch" && k.resource == "jobs" && k.subresource == "":
		switch {
		case hub && (k.verb == "POST" || k.verb == "DELETE" || k.verb == "DELETECOLLECTION"):
			return ownerBench
		case hub || k.verb == "POST" || k.verb == "DELETE":
			return ownerGantry
		}
	case hub && k.group == "batch" && k.resource == "jobs":
		return ownerGantry
	case hub && k.group == "" && k.resource == "namespaces":
		return ownerBench
	case !hub && k.group == "" && k.resource == "namespaces" && k.verb == "POST":
		return ownerGantry
	}
	return ownerKubernetes
}

// eventWrites estimates how many Event writes in a namespace came from Gantry's components and how
// many from others, from the Events there now: one write per Event, plus one per repeat counted.
func eventWrites(ctx context.Context, c *testbed.Cluster, ns string) (gantry, others float64, err error) {
	var list corev1.EventList
	if err := c.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, fmt.Errorf("listing events in %s on %s: %w", ns, c.Name, err)
	}
	for _, e := range list.Items {
		writes := float64(max(1, e.Count))
		if e.Series != nil {
			writes = float64(max(1, e.Series.Count))
		}
		reporter := e.ReportingController
		if reporter == "" {
			reporter = e.Source.Component
		}
		if strings.HasPrefix(reporter, "gantry") {
			gantry += writes
		} else {
			others += writes
		}
	}
	return gantry, others, nil
}
