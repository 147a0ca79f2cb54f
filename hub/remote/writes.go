package remote

import (
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/hub/metrics"
)

// CountWrites returns a copy of cfg whose mutating requests are counted in gantry_hub_api_writes_total,
// by target (metrics.TargetHub or metrics.TargetWorker), worker cluster (empty for the hub), verb,
// resource and status code. Every client through which the hub writes is built from a config that
// passed here: the hub's own in cmd/gantry-hub, each worker's in Manager.connect.
func CountWrites(cfg *rest.Config, target, cluster string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &countingTransport{next: rt, target: target, cluster: cluster}
	})
	return cfg
}

type countingTransport struct {
	next            http.RoundTripper
	target, cluster string
}

// verbs maps the methods that change state to the API's verbs.
var verbs = map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, mutating := verbs[req.Method]
	resource := resourceOf(req.URL.Path)
	// Access reviews are asked with a POST but change nothing.
	if !mutating || strings.HasSuffix(resource, "reviews") {
		return t.next.RoundTrip(req)
	}
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	metrics.APIWrite(t.target, t.cluster, verb, resource, code)
	return resp, err
}

// resourceOf is the resource, with its subresource, a request path of the Kubernetes API names:
// "workloads/status" for /apis/gantry.dev/v1beta1/namespaces/ns/workloads/w/status; empty when the
// path is not one of a resource.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api, version
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:] // apis, group, version
	default:
		return ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // a namespaced resource; "namespaces/<name>" alone is the namespace itself
	}
	switch len(parts) {
	case 0:
		return ""
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
