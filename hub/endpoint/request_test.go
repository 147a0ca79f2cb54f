package endpoint

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/jobkind"
)

// code is the status an error answers with; 200 for none.
func code(err error) int {
	var se *statusError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &se):
		return se.code
	}
	return http.StatusInternalServerError
}

func TestParseLogRequest(t *testing.T) {
	cases := map[string]struct {
		ns, job  string
		query    string
		want     logRequest
		wantCode int
	}{
		"plain":             {ns: "team-a", job: "train", want: logRequest{Namespace: "team-a", Job: view.JobRef{Name: "train"}}},
		"everything":        {ns: "team-a", job: "train", query: "follow=true&podSet=main&container=c1&tailLines=10", want: logRequest{Namespace: "team-a", Job: view.JobRef{Name: "train"}, Follow: true, PodSet: "main", Container: "c1", TailLines: ptr.To[int64](10)}},
		"a kind":            {ns: "team-a", job: "train", query: "kind=JobSet&podSet=workers", want: logRequest{Namespace: "team-a", Job: view.JobRef{Kind: jobkind.JobSet{}, Name: "train"}, PodSet: "workers"}},
		"a kind as kubectl": {ns: "team-a", job: "train", query: "kind=jobs.batch", want: logRequest{Namespace: "team-a", Job: view.JobRef{Kind: jobkind.Job{}, Name: "train"}}},
		"not a kind":        {ns: "a", job: "j", query: "kind=Pod", wantCode: http.StatusBadRequest},
		"follow false":      {ns: "a", job: "j", query: "follow=false", want: logRequest{Namespace: "a", Job: view.JobRef{Name: "j"}}},
		"no tail at all":    {ns: "a", job: "j", query: "tailLines=0", want: logRequest{Namespace: "a", Job: view.JobRef{Name: "j"}, TailLines: ptr.To[int64](0)}},
		"bad namespace":     {ns: "Team_A", job: "j", wantCode: http.StatusBadRequest},
		"bad job":           {ns: "a", job: "J..", wantCode: http.StatusBadRequest},
		"bad follow":        {ns: "a", job: "j", query: "follow=maybe", wantCode: http.StatusBadRequest},
		"negative tail":     {ns: "a", job: "j", query: "tailLines=-1", wantCode: http.StatusBadRequest},
		"tail not a number": {ns: "a", job: "j", query: "tailLines=all", wantCode: http.StatusBadRequest},
		"misspelt key":      {ns: "a", job: "j", query: "tail=5", wantCode: http.StatusBadRequest},
		"key twice":         {ns: "a", job: "j", query: "container=a&container=b", wantCode: http.StatusBadRequest},
		"bad container":     {ns: "a", job: "j", query: "container=A/B", wantCode: http.StatusBadRequest},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseLogRequest(tc.ns, tc.job, q)
			if want := max(tc.wantCode, http.StatusOK); code(err) != want {
				t.Fatalf("status %d (%v), want %d", code(err), err, want)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestWinner(t *testing.T) {
	cond := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	}
	cases := map[string]struct {
		status   gantry.WorkloadStatus
		want     string
		wantCode int
		wantMsg  string
	}{
		"running":        {status: gantry.WorkloadStatus{ClusterName: "worker-1"}, want: "worker-1"},
		"finished there": {status: gantry.WorkloadStatus{ClusterName: "worker-1", Conditions: []metav1.Condition{cond(gantry.WorkloadFinished, gantry.ReasonJobSucceeded, "")}}, want: "worker-1"},
		"waiting for quota": {status: gantry.WorkloadStatus{Conditions: []metav1.Condition{cond(gantry.WorkloadPending, gantry.ReasonWaitingForQuota, "waiting for quota of GlobalQueue gpus")}},
			wantCode: http.StatusConflict, wantMsg: "pending: WaitingForQuota: waiting for quota of GlobalQueue gpus"},
		"no condition yet": {wantCode: http.StatusConflict, wantMsg: "pending: not dispatched yet"},
		"finished without a winner": {status: gantry.WorkloadStatus{Conditions: []metav1.Condition{cond(gantry.WorkloadFinished, gantry.ReasonInvalidJob, "")}},
			wantCode: http.StatusConflict, wantMsg: "finished without running anywhere: InvalidJob"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := winner(&gantry.Workload{Status: tc.status})
			if want := max(tc.wantCode, http.StatusOK); code(err) != want || got != tc.want {
				t.Fatalf("winner %q, status %d (%v); want %q, %d", got, code(err), err, tc.want, want)
			}
			if err != nil && err.Error() != tc.wantMsg {
				t.Errorf("message %q, want %q", err, tc.wantMsg)
			}
		})
	}
}

func TestCheckPodSet(t *testing.T) {
	one := &gantry.Workload{Spec: gantry.WorkloadSpec{PodSets: []gantry.PodSet{{Name: "main", Count: 2}}}}
	two := &gantry.Workload{Spec: gantry.WorkloadSpec{PodSets: []gantry.PodSet{{Name: "driver", Count: 1}, {Name: "workers", Count: 4}}}}
	cases := map[string]struct {
		wl       *gantry.Workload
		podSet   string
		wantCode int
	}{
		"any of one":      {wl: one},
		"the one":         {wl: one, podSet: "main"},
		"another":         {wl: one, podSet: "workers", wantCode: http.StatusNotFound},
		"one of several":  {wl: two, podSet: "workers"},
		"all of several":  {wl: two},
		"none of several": {wl: two, podSet: "main", wantCode: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := checkPodSet(tc.wl, tc.podSet); code(err) != max(tc.wantCode, http.StatusOK) {
				t.Errorf("status %d (%v), want %d", code(err), err, tc.wantCode)
			}
		})
	}
}

// Pods are selected by what Gantry puts on every pod of its job on a worker, whatever the kind: the
// Workload's UID, and the pod set's name when one of several is asked for.
func TestPodSelector(t *testing.T) {
	one := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}, Spec: gantry.WorkloadSpec{PodSets: []gantry.PodSet{{Name: "main"}}}}
	two := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{UID: "uid-2"}, Spec: gantry.WorkloadSpec{PodSets: []gantry.PodSet{{Name: "driver"}, {Name: "workers"}}}}
	for _, tc := range []struct {
		wl     *gantry.Workload
		podSet string
		want   string
	}{
		{wl: one, want: "gantry.dev/workload-uid=uid-1"},
		{wl: one, podSet: "main", want: "gantry.dev/workload-uid=uid-1"},
		{wl: two, want: "gantry.dev/workload-uid=uid-2"},
		{wl: two, podSet: "workers", want: "gantry.dev/pod-set=workers,gantry.dev/workload-uid=uid-2"},
	} {
		if got := podSelector(tc.wl, tc.podSet).String(); got != tc.want {
			t.Errorf("pods of %s, pod set %q: selected by %q, want %q", tc.wl.UID, tc.podSet, got, tc.want)
		}
	}
}

func pod(name string, containers []string, inits ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c})
	}
	for _, c := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: c})
	}
	return p
}

func TestTargets(t *testing.T) {
	pods := []corev1.Pod{pod("train-b", []string{"train", "sidecar"}, "fetch"), pod("train-a", []string{"train"})}
	cases := map[string]struct {
		container string
		want      []target
		wantCode  int
	}{
		"every container, pods by name": {want: []target{{"train-a", "train"}, {"train-b", "train"}, {"train-b", "sidecar"}}},
		"one container":                 {container: "train", want: []target{{"train-a", "train"}, {"train-b", "train"}}},
		"only some pods have it":        {container: "sidecar", want: []target{{"train-b", "sidecar"}}},
		"an init container":             {container: "fetch", want: []target{{"train-b", "fetch"}}},
		"none has it":                   {container: "nope", wantCode: http.StatusNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := targets(pods, tc.container)
			if code(err) != max(tc.wantCode, http.StatusOK) {
				t.Fatalf("status %d (%v), want %d", code(err), err, tc.wantCode)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := targets(pods, "nope"); err.Error() != `no pod of the job has a container "nope"; its containers: sidecar, train` {
		t.Errorf("message: %v", err)
	}
}

func TestBounded(t *testing.T) {
	ts := []target{{"a", "c"}, {"b", "c"}, {"c", "c"}}
	cases := map[string]struct {
		follow      bool
		max         int
		want        int
		wantOmitted int
	}{
		"read, more than max: all, a few at a time": {max: 2, want: 3},
		"followed, within max":                      {follow: true, max: 3, want: 3},
		"followed, beyond max: the first max":       {follow: true, max: 2, want: 2, wantOmitted: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, omitted := bounded(ts, tc.follow, tc.max)
			if len(got) != tc.want || omitted != tc.wantOmitted {
				t.Errorf("kept %d, omitted %d; want %d, %d", len(got), omitted, tc.want, tc.wantOmitted)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	cases := map[string]struct {
		header, want string
		ok           bool
	}{
		"bearer":             {header: "Bearer abc.def", want: "abc.def", ok: true},
		"scheme in any case": {header: "bearer abc", want: "abc", ok: true},
		"spaces around":      {header: "  Bearer   abc  ", want: "abc", ok: true},
		"none":               {},
		"basic":              {header: "Basic dXNlcjpwYXNz"},
		"no token":           {header: "Bearer "},
		"two words":          {header: "Bearer a b"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := bearerToken(tc.header)
			if got != tc.want || ok != tc.ok {
				t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestOptionsCheck(t *testing.T) {
	cases := map[string]struct {
		opts    Options
		wantErr string
	}{
		"loopback":                {opts: Options{BindAddress: "127.0.0.1:18089"}},
		"loopback IPv6":           {opts: Options{BindAddress: "[::1]:8443"}},
		"localhost":               {opts: Options{BindAddress: "localhost:8443"}},
		"anywhere with TLS":       {opts: Options{BindAddress: ":8443", CertFile: "tls.crt", KeyFile: "tls.key"}},
		"anywhere without TLS":    {opts: Options{BindAddress: ":8443"}, wantErr: "not a loopback address"},
		"all addresses":           {opts: Options{BindAddress: "0.0.0.0:8443"}, wantErr: "not a loopback address"},
		"a name":                  {opts: Options{BindAddress: "hub.example:8443"}, wantErr: "not a loopback address"},
		"a certificate, no key":   {opts: Options{BindAddress: ":8443", CertFile: "tls.crt"}, wantErr: "go together"},
		"no port":                 {opts: Options{BindAddress: "127.0.0.1"}, wantErr: "want host:port"},
		"off":                     {},
		"off, with a certificate": {opts: Options{CertFile: "tls.crt", KeyFile: "tls.key"}, wantErr: "off without --endpoint-bind-address"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.Check()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
