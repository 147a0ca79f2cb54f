package view

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

func TestParseJobRef(t *testing.T) {
	const notAKind, notARef = "not a kind of job Gantry dispatches", "want NAME or KIND/NAME"
	for in, tc := range map[string]struct{ want, wantErr string }{
		"train":                          {want: "train"},
		"jobset/train":                   {want: "jobset/train"},
		"JobSet/train":                   {want: "jobset/train"},
		"jobsets/train":                  {want: "jobset/train"},
		"jobsets.jobset.x-k8s.io/train":  {want: "jobset/train"},
		"jobset.jobset.x-k8s.io/train":   {want: "jobset/train"},
		"job/train":                      {want: "job/train"},
		"jobs.batch/train":               {want: "job/train"},
		"rayjob/train":                   {want: "rayjob/train"},
		"rayjobs.ray.io/train":           {want: "rayjob/train"},
		"pod/train":                      {wantErr: notAKind},
		"jobsets.batch/train":            {wantErr: notAKind},
		"jobs.jobset.x-k8s.io/something": {wantErr: notAKind},
		"jobset/":                        {wantErr: notARef},
		"jobset/train/more":              {wantErr: notARef},
	} {
		ref, err := ParseJobRef(in)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseJobRef(%q): error %v, want one saying %q", in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || ref.String() != tc.want):
			t.Errorf("ParseJobRef(%q) = %q, %v; want %q", in, ref, err, tc.want)
		}
	}
}

// Every kind is named by its kind, its resource and both with its group, and RBAC sees the resource of
// its API group.
func TestEveryKindIsNamedAsKubectlNamesIt(t *testing.T) {
	for _, k := range jobkind.All() {
		gvk, r := k.GroupVersionKind(), JobResource(k)
		if r.Group != gvk.Group || r.Resource != strings.ToLower(gvk.Kind)+"s" {
			t.Errorf("%s: resource %s", k.Name(), r)
		}
		for _, name := range []string{gvk.Kind, strings.ToLower(gvk.Kind), r.Resource, r.String(), strings.ToLower(gvk.Kind) + "." + gvk.Group} {
			if got, ok := KindNamed(name); !ok || got.Name() != k.Name() {
				t.Errorf("KindNamed(%q) = %v, %v; want %s", name, got, ok, k.Name())
			}
		}
		want := authorizationv1.ResourceAttributes{Verb: "get", Group: gvk.Group, Version: gvk.Version, Resource: r.Resource, Namespace: "a", Name: "train"}
		if diff := cmp.Diff(want, JobAccess("get", k, "a", "train")); diff != "" {
			t.Errorf("%s: JobAccess (-want +got):\n%s", k.Name(), diff)
		}
	}
	if got := JobAccess("list", jobkind.JobSet{}, "", ""); got.Group != "jobset.x-k8s.io" || got.Resource != "jobsets" {
		t.Errorf("listing JobSets: %+v", got)
	}
}

// kindWorkload is the Workload of job name of kind k, created at t0+minutes (its UID), being deleted
// when deleting.
func kindWorkload(k gantry.JobKind, name string, minutes int, deleting bool) gantry.Workload {
	wl := gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: strings.ToLower(string(k)) + "-" + name, UID: types.UID(strconv.Itoa(minutes)),
		Labels: map[string]string{gantry.JobNameLabel: name}, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))},
		Spec: gantry.WorkloadSpec{JobKind: k}}
	if deleting {
		wl.DeletionTimestamp = &wl.CreationTimestamp
	}
	return wl
}

func TestPickWorkload(t *testing.T) {
	job, js := gantry.JobKindJob, gantry.JobKindJobSet
	cases := map[string]struct {
		ref           JobRef
		wls           []gantry.Workload
		want          string // the UID of the Workload picked; "" for none
		wantAmbiguous bool
	}{
		"none":                       {ref: JobRef{Name: "train"}},
		"one":                        {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(job, "train", 1, false)}, want: "1"},
		"the live one":               {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(job, "train", 1, true), kindWorkload(job, "train", 2, false)}, want: "2"},
		"the live one, listed first": {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(job, "train", 2, false), kindWorkload(job, "train", 3, true)}, want: "2"},
		"both being deleted: newest": {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(job, "train", 1, true), kindWorkload(job, "train", 2, true)}, want: "2"},
		"a JobSet without its kind":  {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(js, "train", 4, false)}, want: "4"},
		"two kinds, none named": {ref: JobRef{Name: "train"}, wls: []gantry.Workload{kindWorkload(js, "train", 4, false), kindWorkload(job, "train", 1, false)},
			wantAmbiguous: true},
		"two kinds, the JobSet named": {ref: JobRef{Kind: jobkind.JobSet{}, Name: "train"},
			wls: []gantry.Workload{kindWorkload(job, "train", 1, false), kindWorkload(js, "train", 4, false)}, want: "4"},
		"a kind named that has none": {ref: JobRef{Kind: jobkind.JobSet{}, Name: "train"}, wls: []gantry.Workload{kindWorkload(job, "train", 1, false)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wl, err := PickWorkload("a", tc.ref, tc.wls)
			var ambiguous *AmbiguousJobError
			if errors.As(err, &ambiguous) != tc.wantAmbiguous {
				t.Fatalf("error %v, want ambiguous: %v", err, tc.wantAmbiguous)
			}
			got := ""
			if wl != nil {
				got = string(wl.UID)
			}
			if got != tc.want {
				t.Errorf("picked the Workload of minute %q, want %q", got, tc.want)
			}
		})
	}
	_, err := PickWorkload("a", JobRef{Name: "train"}, []gantry.Workload{kindWorkload(gantry.JobKindJobSet, "train", 4, false), kindWorkload(gantry.JobKindJob, "train", 1, false)})
	if want := "jobs of 2 kinds are named train in namespace a: name one, as job/train or jobset/train"; err == nil || err.Error() != want {
		t.Errorf("ambiguous: %v, want %q", err, want)
	}
}

func TestJobRefs(t *testing.T) {
	wls := []gantry.Workload{kindWorkload(gantry.JobKindJobSet, "train", 0, false), kindWorkload(gantry.JobKindJob, "train", 0, false),
		kindWorkload(gantry.JobKindJobSet, "eval", 0, false), kindWorkload(gantry.JobKindJob, "b", 0, false)}
	if diff := cmp.Diff([]string{"b", "eval", "job/train", "jobset/train"}, JobRefs(wls)); diff != "" {
		t.Errorf("JobRefs (-want +got):\n%s", diff)
	}
}
