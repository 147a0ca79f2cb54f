package remote

import (
	"errors"
	"maps"
	"net/http"
	"testing"

	"k8s.io/client-go/rest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

func TestResourceOf(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/gantry.dev/v1beta1/namespaces/ns/workloads":                        "workloads",
		"/apis/gantry.dev/v1beta1/namespaces/ns/workloads/w/status":               "workloads/status",
		"/apis/batch/v1/namespaces/ns/jobs/train":                                 "jobs",
		"/api/v1/namespaces":                                                      "namespaces",
		"/api/v1/namespaces/team-a":                                               "namespaces",
		"/apis/coordination.k8s.io/v1/namespaces/gantry-system/leases/gantry-hub": "leases",
		"/apis/gantry.dev/v1beta1/workerclusters/w1/status":                       "workerclusters/status",
		"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews":                   "selfsubjectrulesreviews",
		"/readyz": "",
		"/apis":   "",
	} {
		if got := resourceOf(path); got != want {
			t.Errorf("resourceOf(%s) = %q, want %q", path, got, want)
		}
	}
}

type answer struct {
	code int
	err  error
}

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	if a.err != nil {
		return nil, a.err
	}
	return &http.Response{StatusCode: a.code, Body: http.NoBody}, nil
}

// Writes are counted with their outcome; reads and access reviews are not. The counters are the
// process's: what counts is what the sends add to them, so the test holds when run again (-count).
func TestCountWrites(t *testing.T) {
	send := func(cluster string, rt http.RoundTripper, method, path string) {
		t.Helper()
		cfg := CountWrites(&rest.Config{}, "worker", cluster)
		req, _ := http.NewRequest(method, "https://w.example"+path, nil)
		if resp, err := cfg.WrapTransport(rt).RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	before := writesTo(t, "count-a")
	send("count-a", answer{code: 201}, http.MethodPost, "/apis/batch/v1/namespaces/ns/jobs")
	send("count-a", answer{code: 409}, http.MethodPost, "/apis/batch/v1/namespaces/ns/jobs")
	send("count-a", answer{code: 200}, http.MethodPut, "/apis/gantry.dev/v1beta1/namespaces/ns/workloads/w/status")
	send("count-a", answer{err: errors.New("timeout")}, http.MethodDelete, "/apis/gantry.dev/v1beta1/namespaces/ns/workloads/w")
	send("count-a", answer{code: 200}, http.MethodGet, "/apis/batch/v1/namespaces/ns/jobs")
	send("count-a", answer{code: 201}, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews")
	send("count-a", answer{code: 201}, http.MethodPost, "/apis/example.com/v1/namespaces/ns/widgets")
	want := map[string]float64{"create jobs 201": 1, "create jobs 409": 1, "update workloads/status 200": 1,
		"delete workloads error": 1, "create Other 201": 1}
	got := writesTo(t, "count-a")
	for k, n := range before {
		if got[k] -= n; got[k] == 0 {
			delete(got, k)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("writes counted %v, want %v", got, want)
	}
}

// writesTo reads the hub's write counters of one worker cluster, by "verb resource code".
func writesTo(t *testing.T, cluster string) map[string]float64 {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "gantry_hub_api_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["cluster"] == cluster && l["target"] == "worker" {
				out[l["verb"]+" "+l["resource"]+" "+l["code"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}
