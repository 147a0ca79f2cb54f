package cli

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// hubWith is the fleet and the JobSets on a hub whose reads of some kinds fail with refuse's error.
func hubWith(refuse func(obj runtime.Object) error, extra ...client.Object) client.WithWatch {
	fail := func(obj runtime.Object) error {
		if refuse == nil {
			return nil
		}
		return refuse(obj)
	}
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(append(fleet(), jobSets()...), extra...)...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if err := fail(list); err != nil {
					return err
				}
				return c.List(ctx, list, opts...)
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := fail(obj); err != nil {
					return err
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
}

// notServed fails reads of the types of objs (objects and lists) as an API server without their CRDs
// does.
func notServed(objs ...runtime.Object) func(runtime.Object) error {
	return func(obj runtime.Object) error {
		for _, o := range objs {
			if reflect.TypeOf(o) == reflect.TypeOf(obj) {
				return &apimeta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: reflect.TypeOf(obj).Elem().Name()}}
			}
		}
		return nil
	}
}

func TestJobsListsEveryKindServed(t *testing.T) {
	out, err := runOn(hubWith(nil), "jobs", "-n", "team-a", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: List", "kind: Job\n", "apiVersion: jobset.x-k8s.io/v1alpha2", "kind: JobSet", "name: train"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs -o yaml has no %q:\n%s", want, out)
		}
	}
	// Without the JobSet and RayJob CRDs on the hub: the Jobs alone, and not a word about the others.
	out, err = runOn(hubWith(notServed(&jobset.JobSetList{}, &ray.RayJobList{})), "jobs", "-n", "team-a")
	if err != nil || strings.Contains(out, "JobSet") || strings.Contains(out, "train") || !strings.Contains(out, "AdmittedByCluster") {
		t.Errorf("jobs on a hub without JobSets: %v\n%s", err, out)
	}
}

func TestJobsLeavesOutTheKindsTheUserMayNotList(t *testing.T) {
	forbidden := func(obj runtime.Object) error {
		if _, ok := obj.(*jobset.JobSetList); ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}, "", errors.New("RBAC"))
		}
		return nil
	}
	out, err := runOn(hubWith(forbidden), "jobs", "-n", "team-a")
	if err != nil || !strings.Contains(out, "JobSets are left out: you may not list them in namespace team-a on the hub.") ||
		strings.Contains(out, "train") || !strings.Contains(out, "NoWorkload") {
		t.Errorf("jobs without the right to list JobSets: %v\n%s", err, out)
	}
}

// A name that jobs of two kinds have must be given with its kind; with it, each is explained, even
// without a Workload.
func TestExplainNamesTheKindWhenJobsOfSeveralShareAName(t *testing.T) {
	noWorkload := jobSet("c")
	noWorkload.Status = jobset.JobSetStatus{}
	alone := jobSet("d")
	c := hubWith(nil, jobSet("a"), noWorkload, alone,
		&gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "jobset-a", Namespace: "team-a", Labels: map[string]string{gantry.JobNameLabel: "a"}},
			Spec: gantry.WorkloadSpec{JobKind: gantry.JobKindJobSet, QueueName: "qa"}})
	var ambiguous *view.AmbiguousJobError
	for _, name := range []string{"a", "c"} {
		if _, err := runOn(c, "explain", name, "-n", "team-a"); !errors.As(err, &ambiguous) || !strings.Contains(err.Error(), "job/"+name+" or jobset/"+name) {
			t.Errorf("explain %s: %v, want it to ask for job/%s or jobset/%s", name, err, name, name)
		}
	}
	for args, want := range map[string]string{
		"jobset/a":      "JobSet team-a/a (Workload jobset-a)",
		"job/a":         "Job team-a/a (Workload job-a)",
		"jobsets/c":     "JobSet team-a/c has no Workload on the hub.",
		"job.batch/c":   "Job team-a/c has no Workload on the hub.",
		"d":             "JobSet team-a/d has no Workload on the hub.",
		"jobset-train":  "JobSet team-a/train (Workload jobset-train)",
		"rayjob/d":      "error: no RayJob d in namespace team-a on the hub",
		"nope":          "error: no Job, JobSet, RayJob",
		"pods/a":        "error: \"pods\" is not a kind of job Gantry dispatches",
		"jobset/a/more": "error: \"jobset/a/more\": want NAME or KIND/NAME",
	} {
		out, err := runOn(c, "explain", args, "-n", "team-a")
		if err != nil {
			out = "error: " + err.Error()
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("explain %s:\n%s\nwant it to start with %q", args, out, want)
		}
	}
	// A kind the hub does not serve has no job of the name; the others are asked still.
	out, err := runOn(hubWith(notServed(&ray.RayJob{}), alone), "explain", "d", "-n", "team-a")
	if err != nil || !strings.HasPrefix(out, "JobSet team-a/d has no Workload") {
		t.Errorf("explain d on a hub without RayJobs: %v\n%s", err, out)
	}
}
