package endpoint

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub/remote"
)

// hubAPI answers the endpoint's reviews as the hub's API server would: tokens of alice, bob, carol and
// dave are valid; in team-a alice may read pod logs and get Jobs and JobSets, carol pod logs only, dave
// pod logs and JobSets only; bob nothing anywhere.
func hubAPI() *fake.Clientset {
	cs := fake.NewClientset()
	users := map[string]string{"alice-token": "alice", "bob-token": "bob", "carol-token": "carol", "dave-token": "dave"}
	may := map[string][]string{"alice": {"pods/log", "jobs.batch", "jobsets.jobset.x-k8s.io"}, "carol": {"pods/log"},
		"dave": {"pods/log", "jobsets.jobset.x-k8s.io"}}
	cs.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, kruntime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if name, ok := users[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}}}
		} else {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, review, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, kruntime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		a := review.Spec.ResourceAttributes
		what := a.Resource + "/" + a.Subresource
		if a.Subresource == "" {
			what = schema.GroupResource{Group: a.Group, Resource: a.Resource}.String()
		}
		review.Status.Allowed = slices.Contains(may[review.Spec.User], what) && a.Namespace == "team-a" && a.Verb == "get" &&
			len(review.Spec.Groups) == 1
		return true, review, nil
	})
	return cs
}

// fakeWorker is a worker's pods and their logs: "pod/container" -> log.
type fakeWorker struct {
	pods    []corev1.Pod
	logs    map[string]string
	listErr error
	// follow, when set, is the log of every followed container: it blocks for more until closed.
	follow func() io.ReadCloser

	mu       sync.Mutex
	selector string
	opts     []corev1.PodLogOptions
}

func (f *fakeWorker) List(_ context.Context, ns string, sel labels.Selector) ([]corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.selector = sel.String()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []corev1.Pod
	for _, p := range f.pods {
		if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (f *fakeWorker) Log(_ context.Context, _, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opts = append(f.opts, *opts)
	if opts.Follow && f.follow != nil {
		return f.follow(), nil
	}
	text, ok := f.logs[pod+"/"+opts.Container]
	if !ok {
		return nil, errors.New("container is waiting to start")
	}
	return io.NopCloser(strings.NewReader(text)), nil
}

type fakeWorkers map[string]*fakeWorker

func (w fakeWorkers) Pods(_ context.Context, cluster string) (remote.Pods, error) {
	if p, ok := w[cluster]; ok {
		return p, nil
	}
	return nil, errors.New("Secret gantry-system/" + cluster + "-kubeconfig not found")
}

func hubWorkload(name, job, cluster string, conds ...metav1.Condition) *gantry.Workload {
	return &gantry.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", UID: types.UID("uid-" + job), Labels: map[string]string{gantry.JobNameLabel: job}},
		Spec:       gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 2}}},
		Status:     gantry.WorkloadStatus{ClusterName: cluster, Conditions: conds},
	}
}

// hubJobSetWorkload is the Workload of JobSet job, with pod sets driver and workers, running on cluster.
func hubJobSetWorkload(job, cluster string) *gantry.Workload {
	wl := hubWorkload("jobset-"+job, job, cluster)
	wl.UID = types.UID("uid-jobset-" + job)
	wl.Spec.JobKind = gantry.JobKindJobSet
	wl.Spec.PodSets = []gantry.PodSet{{Name: "driver", Count: 1}, {Name: "workers", Count: 2}}
	return wl
}

func jobPod(name, job string, containers ...string) corev1.Pod {
	p := pod(name, containers)
	p.Namespace = "team-a"
	p.Labels = map[string]string{batchv1.JobNameLabel: job, gantry.WorkloadUIDLabel: "uid-" + job, gantry.PodSetLabel: "main"}
	return p
}

// jobSetPod is a pod of the JobSet job's pod set: its Job's name is the JobSet's controller's.
func jobSetPod(name, job, podSet string) corev1.Pod {
	p := pod(name, []string{"train"})
	p.Namespace = "team-a"
	p.Labels = map[string]string{batchv1.JobNameLabel: job + "-" + podSet + "-0", gantry.WorkloadUIDLabel: "uid-jobset-" + job, gantry.PodSetLabel: podSet}
	return p
}

type fixture struct {
	server *httptest.Server
	worker *fakeWorker
	logs   *Logs
}

func newFixture(t *testing.T, maxStreams, maxTotal int) *fixture {
	t.Helper()
	scheme := kruntime.NewScheme()
	if err := gantry.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hub := ctrlfake.NewClientBuilder().WithScheme(scheme).WithObjects(
		hubWorkload("job-train", "train", "worker-1"),
		hubWorkload("job-waiting", "waiting", "", metav1.Condition{Type: gantry.WorkloadPending, Status: metav1.ConditionTrue,
			Reason: gantry.ReasonWaitingForQuota, Message: "waiting for quota of GlobalQueue gpus"}),
		hubWorkload("job-lost", "lost", "worker-9"),
		hubWorkload("job-forbidden", "forbidden", "worker-2"),
		hubJobSetWorkload("dist", "worker-1"),
		hubWorkload("job-twin", "twin", "worker-1"), hubJobSetWorkload("twin", "worker-1"),
	).Build()
	foreign := jobPod("train-x", "train", "train")
	foreign.Labels[gantry.WorkloadUIDLabel] = "uid-of-another"
	w1 := &fakeWorker{
		pods: []corev1.Pod{jobPod("train-1", "train", "train"), jobPod("train-0", "train", "train", "sidecar"), foreign,
			jobSetPod("dist-driver-0-0", "dist", "driver"), jobSetPod("dist-workers-0-0", "dist", "workers"), jobSetPod("dist-workers-0-1", "dist", "workers"),
			jobSetPod("twin-main-0-0", "twin", "main")},
		logs: map[string]string{"train-0/train": "epoch 1\nepoch 2\n", "train-0/sidecar": "ready\n", "train-1/train": "epoch 1\nepoch 2\n",
			"train-x/train": "not Gantry's\n", "dist-driver-0-0/train": "driving\n", "dist-workers-0-0/train": "working\n",
			"dist-workers-0-1/train": "working\n", "twin-main-0-0/train": "the JobSet twin\n"},
	}
	w2 := &fakeWorker{listErr: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("cannot list pods"))}
	hubAPIs := hubAPI()
	logs := &Logs{Hub: hub, Allowed: Authorizer(hubAPIs.AuthorizationV1().SubjectAccessReviews()),
		Workers: fakeWorkers{"worker-1": w1, "worker-2": w2}, MaxStreams: maxStreams, MaxTotal: maxTotal}
	srv := httptest.NewServer(NewHandler(Config{Reviews: hubAPIs.AuthenticationV1().TokenReviews(), Logs: logs}))
	t.Cleanup(srv.Close)
	return &fixture{server: srv, worker: w1, logs: logs}
}

func (f *fixture) get(t *testing.T, token, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestLogsEndpoint(t *testing.T) {
	cases := map[string]struct {
		token, path  string
		wantCode     int
		wantBody     string              // contained in the answer
		wantLines    map[string][]string // for a 200: lines by prefix
		wantSelector string              // for a 200: of the pods listed; the Job train's when empty
	}{
		"no token":  {path: "/logs/team-a/train", wantCode: http.StatusUnauthorized, wantBody: "no bearer token"},
		"bad token": {token: "stolen", path: "/logs/team-a/train", wantCode: http.StatusUnauthorized, wantBody: "does not accept the token"},
		"a user without pods/log there": {token: "bob-token", path: "/logs/team-a/train", wantCode: http.StatusForbidden,
			wantBody: "bob may not get pods/log in namespace team-a on the hub"},
		"alice in another namespace": {token: "alice-token", path: "/logs/team-b/train", wantCode: http.StatusForbidden},
		"every container of Gantry's pods": {token: "alice-token", path: "/logs/team-a/train", wantCode: http.StatusOK,
			wantLines: map[string][]string{"[train-0/train] ": {"epoch 1", "epoch 2"}, "[train-0/sidecar] ": {"ready"}, "[train-1/train] ": {"epoch 1", "epoch 2"}}},
		"one container": {token: "alice-token", path: "/logs/team-a/train?container=sidecar&podSet=main", wantCode: http.StatusOK,
			wantLines: map[string][]string{"[train-0/sidecar] ": {"ready"}}},
		"no such container": {token: "alice-token", path: "/logs/team-a/train?container=nope", wantCode: http.StatusNotFound, wantBody: "its containers: sidecar, train"},
		"no such pod set":   {token: "alice-token", path: "/logs/team-a/train?podSet=workers", wantCode: http.StatusNotFound, wantBody: "its pod sets: main"},
		"a user who may not get the Job": {token: "carol-token", path: "/logs/team-a/train", wantCode: http.StatusForbidden,
			wantBody: "carol may not get jobs.batch train in namespace team-a on the hub"},
		"a JobSet's pods, whatever their Jobs": {token: "dave-token", path: "/logs/team-a/dist", wantCode: http.StatusOK,
			wantLines:    map[string][]string{"[dist-driver-0-0/train] ": {"driving"}, "[dist-workers-0-0/train] ": {"working"}, "[dist-workers-0-1/train] ": {"working"}},
			wantSelector: "gantry.dev/workload-uid=uid-jobset-dist"},
		"one pod set of a JobSet": {token: "dave-token", path: "/logs/team-a/dist?podSet=workers&kind=JobSet", wantCode: http.StatusOK,
			wantLines:    map[string][]string{"[dist-workers-0-0/train] ": {"working"}, "[dist-workers-0-1/train] ": {"working"}},
			wantSelector: "gantry.dev/pod-set=workers,gantry.dev/workload-uid=uid-jobset-dist"},
		"a JobSet's to a user who may not get JobSets": {token: "carol-token", path: "/logs/team-a/dist", wantCode: http.StatusForbidden,
			wantBody: "carol may not get jobsets.jobset.x-k8s.io dist in namespace team-a on the hub"},
		"a name of two kinds": {token: "alice-token", path: "/logs/team-a/twin", wantCode: http.StatusConflict, wantBody: "name one, as job/twin or jobset/twin"},
		"a name of two kinds, the kind named": {token: "alice-token", path: "/logs/team-a/twin?kind=JobSet", wantCode: http.StatusOK,
			wantLines: map[string][]string{"[twin-main-0-0/train] ": {"the JobSet twin"}}, wantSelector: "gantry.dev/workload-uid=uid-jobset-twin"},
		"a kind that has none of the name": {token: "alice-token", path: "/logs/team-a/train?kind=JobSet", wantCode: http.StatusNotFound,
			wantBody: "no Workload for job jobset/train in namespace team-a"},
		"not dispatched": {token: "alice-token", path: "/logs/team-a/waiting", wantCode: http.StatusConflict,
			wantBody: "pending: WaitingForQuota: waiting for quota of GlobalQueue gpus"},
		"no such job":           {token: "alice-token", path: "/logs/team-a/nope", wantCode: http.StatusNotFound, wantBody: "no Workload for job nope in namespace team-a"},
		"a worker out of reach": {token: "alice-token", path: "/logs/team-a/lost", wantCode: http.StatusServiceUnavailable, wantBody: "the job runs on worker-9"},
		"a worker that refuses": {token: "alice-token", path: "/logs/team-a/forbidden", wantCode: http.StatusBadGateway, wantBody: "gantry-hub-remote-logs"},
		"a bad query":           {token: "alice-token", path: "/logs/team-a/train?tail=3", wantCode: http.StatusBadRequest, wantBody: "unknown query parameter"},
		"another method":        {token: "alice-token", path: "/logs/team-a/train/more", wantCode: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 8, 64)
			resp, body := f.get(t, tc.token, tc.path)
			if resp.StatusCode != tc.wantCode || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("%d %q, want %d with %q", resp.StatusCode, body, tc.wantCode, tc.wantBody)
			}
			if tc.wantCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("a 401 without WWW-Authenticate")
			}
			if tc.wantLines == nil {
				return
			}
			if diff := cmp.Diff(tc.wantLines, byPrefix(t, body)); diff != "" {
				t.Errorf("lines by source (-want +got):\n%s", diff)
			}
			want := tc.wantSelector
			if want == "" {
				want = "gantry.dev/workload-uid=uid-train"
			}
			if f.worker.selector != want {
				t.Errorf("pods selected by %q, want %q", f.worker.selector, want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

// follow and tailLines reach the worker as the pods' log options.
func TestLogsEndpointPassesTheLogOptions(t *testing.T) {
	f := newFixture(t, 8, 64)
	resp, _ := f.get(t, "alice-token", "/logs/team-a/train?container=train&tailLines=5&follow=true")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, o := range f.worker.opts {
		if !o.Follow || o.TailLines == nil || *o.TailLines != 5 || o.Container != "train" {
			t.Errorf("log options %+v, want follow, 5 lines of train", o)
		}
	}
	if len(f.worker.opts) != 2 {
		t.Errorf("%d logs opened, want 2", len(f.worker.opts))
	}
}

// A followed job with more containers than one request may follow follows the first ones, and says how
// many it left out; the streams of all requests together are bounded too.
func TestLogsEndpointBoundsItsStreams(t *testing.T) {
	f := newFixture(t, 2, 2)
	var mu sync.Mutex
	var open []*endless
	opened := make(chan struct{}, 8)
	f.worker.follow = func() io.ReadCloser {
		mu.Lock()
		defer mu.Unlock()
		e := newEndless()
		open = append(open, e)
		opened <- struct{}{}
		return e
	}
	req, _ := http.NewRequest(http.MethodGet, f.server.URL+"/logs/team-a/train?follow=true", nil)
	req.Header.Set("Authorization", "Bearer alice-token")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get(OmittedHeader) != "1" {
		t.Fatalf("status %d, %s %q; want 200 and 1 left out", resp.StatusCode, OmittedHeader, resp.Header.Get(OmittedHeader))
	}
	second, body := f.get(t, "alice-token", "/logs/team-a/train?follow=true")
	if second.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "at most 2 logs at once") {
		t.Errorf("a second request while two streams are open: %d %q, want 429", second.StatusCode, body)
	}
	for range 2 { // the client leaves once both streams follow
		select {
		case <-opened:
		case <-time.After(10 * time.Second):
			t.Fatal("the followed request did not open its two streams")
		}
	}
	cancel()
	// Closing the server returns once every request it took has been answered: the followed one ends
	// only if leaving ends it.
	closed := make(chan struct{})
	go func() { f.server.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		mu.Lock()
		for _, e := range open {
			_ = e.Close() // so that the request ends, and the server closes
		}
		mu.Unlock()
		t.Fatal("the followed request still served 10 s after the client left")
	}
	f.logs.mu.Lock()
	active := f.logs.active
	f.logs.mu.Unlock()
	if active != 0 {
		t.Errorf("%d streams still counted after the client left", active)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, e := range open {
		if !e.closed.Load() {
			t.Errorf("followed stream %d left open after the client left", i)
		}
	}
}
