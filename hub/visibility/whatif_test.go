package visibility

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher"
	"github.com/gantry-dev/gantry/internal/hubtest"
	"github.com/gantry-dev/gantry/jobkind"
)

// job is a Job of pods×gpus GPUs in namespace ns on Queue q; extra lines go into its metadata.
func job(pods, gpus string, extra ...string) string {
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  labels: {gantry.dev/queue-name: q}
` + strings.Join(extra, "\n") + `
spec:
  parallelism: ` + pods + `
  completions: ` + pods + `
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: trainer
        resources: {limits: {nvidia.com/gpu: "` + gpus + `"}}
`
}

// whatIfServer serves what-if requests over a hub with one connected cluster w1 of 8 GPUs, with 8 GPUs
// of quota in GlobalQueue gq, which namespace ns reaches through Queue q; objs are added.
func whatIfServer(t *testing.T, allowed func(context.Context, authorizationv1.ResourceAttributes) (bool, error), p Predictor, objs ...client.Object) *httptest.Server {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gantry.AddToScheme, jobkind.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	objs = append(objs,
		hubtest.MakeGlobalQueue("gq").Select("team", "a").Cluster("w1", gantry.GPUResource, "8").Obj(),
		hubtest.MakeWorkerCluster("w1").AgentReady().Connected().GPUs("A100", 1, 8, 8).Obj(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}},
		hubtest.MakeQueue("q", "ns").GlobalQueue("gq").Obj())
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	if p == nil {
		p = dispatcher.NewPredictor(c, nil, func() bool { return false }, clocktesting.NewFakePassiveClock(hubtest.T0))
	}
	mux := http.NewServeMux()
	(&Handler{WhatIf: &WhatIf{Decoder: serializer.NewCodecFactory(s).UniversalDeserializer(), Hub: c, Predictor: p, Allowed: allowed}}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// mayCreateJobs lets the user create batch Jobs in namespace ns, and nothing else.
func mayCreateJobs(_ context.Context, a authorizationv1.ResourceAttributes) (bool, error) {
	return a == authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "create", Group: "batch", Resource: "jobs"}, nil
}

func post(t *testing.T, srv *httptest.Server, ns, body string) (int, *visibility.WhatIf, string) {
	t.Helper()
	ns, query, _ := strings.Cut(ns, "?")
	if query != "" {
		query = "?" + query
	}
	resp, err := http.Post(srv.URL+"/apis/visibility.gantry.dev/v1beta1/namespaces/"+ns+"/whatif"+query, "application/yaml", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(raw)
	}
	var out visibility.WhatIf
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, &out, ""
}

// A Job that fits is dispatched to w1 at once; one that asks for more than the quota waits for it,
// with a forecast that says the queue started none of its size; nothing is created either way.
func TestWhatIfAnswersWhatThePassWouldDecide(t *testing.T) {
	srv := whatIfServer(t, mayCreateJobs, nil)
	code, got, msg := post(t, srv, "ns", job("1", "4"))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, msg)
	}
	if got.Kind != visibility.WhatIfKind || got.Decision != visibility.DecisionDispatch || len(got.Nominated) != 1 || got.Nominated[0] != "w1" ||
		got.Workload != "job-train" || got.GlobalQueue != "gq" || got.Forecast != nil {
		t.Errorf("answer %+v; want Job train dispatched to w1 under gq", got)
	}
	if len(got.Clusters) != 1 || !got.Clusters[0].Candidate || got.Clusters[0].Quota.Name(gantry.GPUResource, "").String() != "8" ||
		len(got.Clusters[0].GPUs) != 1 || got.Clusters[0].GPUs[0].Free != 8 {
		t.Errorf("w1 judged %+v", got.Clusters)
	}

	code, got, msg = post(t, srv, "ns", job("4", "4"))
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, msg)
	}
	if got.Decision != visibility.DecisionWait || got.Reason != gantry.ReasonNoClusterCanHold || got.Forecast == nil || got.Forecast.Known ||
		got.Forecast.Ahead != 1 || got.PositionInGlobalQueue != 1 || got.PendingInGlobalQueue != 1 {
		t.Errorf("answer %+v (forecast %+v); want it waiting, no forecast from a queue that started nothing", got, got.Forecast)
	}
}

// Each request a user can get wrong is refused with what is wrong; the predictor is not asked.
func TestWhatIfRefusesWhatItCannotAnswer(t *testing.T) {
	srv := whatIfServer(t, mayCreateJobs, nil)
	for name, tc := range map[string]struct {
		ns, body string
		code     int
		says     string
	}{
		"not allowed in the namespace": {"other", job("1", "1"), http.StatusForbidden, "you may not create jobs.batch in namespace other"},
		"not YAML":                     {"ns", "{{{", http.StatusBadRequest, "not a job Gantry dispatches"},
		"not a job": {"ns", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", http.StatusBadRequest,
			"a ConfigMap is not a kind of job Gantry dispatches"},
		"another namespace": {"ns", job("1", "1", "  namespace: elsewhere"), http.StatusBadRequest, "the job names namespace elsewhere, the request ns"},
		"no queue label":    {"ns", strings.Replace(job("1", "1"), "gantry.dev/queue-name: q", "team: a", 1), http.StatusUnprocessableEntity, "no gantry.dev/queue-name label"},
		"a bad annotation":  {"ns", job("1", "1", "  annotations: {gantry.dev/checkpoint-interval: often}"), http.StatusUnprocessableEntity, "would not dispatch this Job"},
		"no such priority":  {"ns", strings.Replace(job("1", "1"), "restartPolicy: Never", "restartPolicy: Never\n      priorityClassName: urgent", 1), http.StatusUnprocessableEntity, `PriorityClass "urgent" of the pod template not found`},
		"submitted already": {"ns", strings.Replace(job("1", "1"), "name: train", "name: old", 1), http.StatusConflict, "kubectl gantry explain job old -n ns"},
		"a query parameter": {"ns?dryRun=All", job("1", "1"), http.StatusBadRequest, "takes no query parameters"},
	} {
		t.Run(name, func(t *testing.T) {
			srv := srv
			if name == "submitted already" {
				srv = whatIfServer(t, mayCreateJobs, nil, hubtest.MakeWorkload("job-old", "ns").Queue("q").Obj())
			}
			code, _, msg := post(t, srv, tc.ns, tc.body)
			if code != tc.code || !strings.Contains(msg, tc.says) {
				t.Errorf("%d %q; want %d saying %q", code, msg, tc.code, tc.says)
			}
		})
	}
}

// A PriorityClass the job names gives it its priority, and a failed review of the user's access is
// an error of the hub's, to retry.
func TestWhatIfReadsThePriorityAndReportsFailedReviews(t *testing.T) {
	urgent := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "urgent"}, Value: 1000}
	srv := whatIfServer(t, mayCreateJobs, nil, urgent)
	code, got, msg := post(t, srv, "ns", strings.Replace(job("1", "1"), "restartPolicy: Never", "restartPolicy: Never\n      priorityClassName: urgent", 1))
	if code != http.StatusOK || got.Priority != 1000 {
		t.Errorf("%d %s %+v; want priority 1000", code, msg, got)
	}
	failing := func(context.Context, authorizationv1.ResourceAttributes) (bool, error) {
		return false, errors.New("timeout")
	}
	if code, _, msg := post(t, whatIfServer(t, failing, nil), "ns", job("1", "1")); code != http.StatusServiceUnavailable || !strings.Contains(msg, "try again") {
		t.Errorf("%d %q; want 503", code, msg)
	}
}

// answerOf says a preemption's victims, and a forecast's range, as the API defines them.
func TestAnswerOfPreemptionAndForecast(t *testing.T) {
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train"}, Spec: gantry.WorkloadSpec{QueueName: "q"}}
	j := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train"}}
	kind, _ := jobkind.Named(gantry.JobKindJob)
	a := &dispatcher.Answer{Workload: &dispatch.Workload{GlobalQueue: "gq"}, Now: hubtest.T0}
	a.Preemptions = append(a.Preemptions, dispatch.Preemption{Victim: "other/low", Cluster: "w1"})
	got := answerOf(j, kind, wl, a)
	if got.Decision != visibility.DecisionPreempt || len(got.Preemptions) != 1 || got.Preemptions[0] != (visibility.WhatIfPreemption{Namespace: "other", Name: "low", Cluster: "w1"}) || got.Forecast != nil {
		t.Errorf("answer %+v", got)
	}
	a.Preemptions = nil
	a.Forecast.Known, a.Forecast.Early, a.Forecast.Likely, a.Forecast.Late, a.Forecast.Rate, a.Forecast.Ahead = true, time.Minute, 5*time.Minute, 12*time.Minute, 2.5, 3
	f := answerOf(j, kind, wl, a).Forecast
	if f == nil || !f.Known || f.Likely.Duration != 5*time.Minute || f.Late.Duration != 12*time.Minute || f.StartsPerHour != "2.5" || f.Coverage != 80 || f.Ahead != 3 || f.Window.Duration != 6*time.Hour {
		t.Errorf("forecast %+v", f)
	}
}
