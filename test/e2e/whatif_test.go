package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// measuredJobs are the jobs asked about, then submitted, whose forecasts are measured.
const measuredJobs = 12

// TestWhatIfSaysWhereAJobWouldGoAndWhenItWouldStart gives a namespace 2 GPUs of worker-1. A tenant who
// may create Jobs there asks kubectl gantry whatif of a 1-GPU job: it would go to worker-1 now, and
// nothing is created; a tenant who may only read Jobs is refused. Once two jobs ran, each of a dozen
// jobs is asked about and submitted at once: the first are dispatched at once, those that would wait
// get a forecast from the queue's runs, and the test measures how many started within its range.
func TestWhatIfSaysWhereAJobWouldGoAndWhenItWouldStart(t *testing.T) {
	ns := newNamespace(t, "e2e-whatif")
	dumpOnFailure(t, ns)
	ownQueueOn(t, ns, "worker-1", 2)
	submitter := tokenWithRules(t, ns, "submitter", false,
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}})
	reader := tokenWithRules(t, ns, "reader", false,
		rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}})

	first := makeJob(ns, "first").gpus(1).obj()
	file := jobFile(t, first)
	out, stderr, err := kubectlGantryAs(t, submitter, "whatif", "-f", file)
	if err != nil || !strings.Contains(out, "worker-1") || !strings.Contains(out, visibility.DecisionDispatch) {
		t.Fatalf("kubectl gantry whatif as the submitter: %v %s\n%s; want it dispatched to worker-1", err, stderr, out)
	}
	t.Logf("kubectl gantry whatif -f first.yaml:\n%s", out)
	if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, "first")},
		&gantry.Workload{}); !apierrors.IsNotFound(err) {
		t.Errorf("after whatif, the Workload of first: %v; want none", err)
	}
	if err := tb.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "first"}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("after whatif, the Job first: %v; want none", err)
	}
	if _, stderr, err := kubectlGantryAs(t, reader, "whatif", "-f", file); err == nil || !strings.Contains(stderr, "you may not create jobs.batch in namespace "+ns) {
		t.Errorf("kubectl gantry whatif as a reader: %v %s; want refused", err, stderr)
	}

	// A history: the forecast reads how long the queue's jobs ran.
	history := []*batchv1.Job{makeJob(ns, "history-0").gpus(1).runsFor("3s").obj(), makeJob(ns, "history-1").gpus(1).runsFor("3s").obj()}
	for _, j := range history {
		submit(t, j)
	}
	allComplete(t, history, 2*time.Minute)
	measureForecasts(t, ns, submitter)
}

// asked is a job asked about, when, and what whatif answered.
type asked struct {
	job    *batchv1.Job
	at     time.Time
	answer visibility.WhatIf
}

// measureForecasts asks whatif, with the token, of each of measuredJobs jobs and submits it at once, then compares the
// forecasts with when the jobs started (their runs), and says how many started within the range.
func measureForecasts(t *testing.T, ns, token string) {
	t.Helper()
	var all []asked
	for i := range measuredJobs {
		j := makeJob(ns, fmt.Sprintf("measured-%d", i)).gpus(1).runsFor("3s").obj()
		a := asked{job: j, at: time.Now()}
		out, stderr, err := kubectlGantryAs(t, token, "whatif", "-f", jobFile(t, j), "-o", "json")
		if err != nil {
			t.Fatalf("kubectl gantry whatif %s -o json: %v\n%s", j.Name, err, stderr)
		}
		if err := json.Unmarshal([]byte(out), &a.answer); err != nil {
			t.Fatalf("whatif -o json: %v\n%s", err, out)
		}
		if i == measuredJobs-1 {
			table, _, _ := kubectlGantryAs(t, token, "whatif", "-f", jobFile(t, j))
			if !strings.Contains(table, "Forecast:") {
				t.Errorf("kubectl gantry whatif of a job that would wait shows no forecast:\n%s", table)
			}
			t.Logf("kubectl gantry whatif -f %s.yaml:\n%s", j.Name, table)
		}
		submit(t, j)
		all = append(all, a)
	}
	jobs := make([]*batchv1.Job, len(all))
	for i := range all {
		jobs[i] = all[i].job
	}
	allComplete(t, jobs, 4*time.Minute)

	waited, within, mostAhead, coverage := 0, 0, 0, int32(0)
	for _, a := range all {
		f := a.answer.Forecast
		if a.answer.Decision != visibility.DecisionWait || f == nil || !f.Known {
			continue // dispatched at once, or asked before the queue started a job
		}
		waited++
		mostAhead, coverage = max(mostAhead, f.Ahead), f.Coverage
		runs := hubWorkload(t, a.job).Status.Runs
		if len(runs) == 0 {
			t.Errorf("%s ran, yet its Workload records no run", a.job.Name)
			continue
		}
		wait := runs[0].Started.Sub(a.at)
		if wait >= f.Early.Duration && wait <= f.Late.Duration {
			within++
		}
		t.Logf("%s: %d ahead, forecast %v (%v..%v), started after %v", a.job.Name, f.Ahead, f.Likely.Duration, f.Early.Duration, f.Late.Duration, wait.Round(time.Second))
	}
	if waited < 3 {
		t.Fatalf("%d of %d jobs had a forecast: too few measured", waited, measuredJobs)
	}
	// Jobs are submitted faster than two GPUs run them: the queue fills.
	if mostAhead < 2 {
		t.Errorf("at most %d job ahead; want the queue to fill", mostAhead)
	}
	t.Logf("forecast: %d of %d waiting jobs started within the %d%% range", within, waited, coverage)
}

// jobFile writes the job as YAML, as a user would keep it, into the test's temporary directory.
func jobFile(t *testing.T, j *batchv1.Job) string {
	t.Helper()
	obj := j.DeepCopy()
	obj.APIVersion, obj.Kind = "batch/v1", "Job"
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), j.Name+".yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
