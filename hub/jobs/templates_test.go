package jobs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// liveReads stands for the API server: it counts the reads and serves the jobs it was given.
type liveReads struct {
	jobs  map[types.NamespacedName]*batchv1.Job
	reads int
}

func (l *liveReads) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	l.reads++
	j, ok := l.jobs[key]
	if !ok {
		return errors.New("not served")
	}
	j.DeepCopyInto(obj.(*batchv1.Job))
	return nil
}

func (l *liveReads) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not served")
}

func jobNamed(name, version string) *batchv1.Job {
	j := queuedJob()
	j.Name, j.UID, j.ResourceVersion = name, types.UID("uid-"+name), version
	return j
}

// trimmed runs the cache's transform over the job, as the informer does.
func trimmed(t *testing.T, templates *Templates, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	out, err := templates.Trim(job)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*batchv1.Job)
}

// The template the cache's transform dropped makes the job whole again without a read of the API
// server, for the version it was taken from only.
func TestAKeptTemplateSparesTheRead(t *testing.T) {
	templates := NewTemplates(4)
	whole := jobNamed("a", "7")
	cached := trimmed(t, templates, whole.DeepCopy())
	live := &liveReads{jobs: map[types.NamespacedName]*batchv1.Job{client.ObjectKeyFromObject(whole): whole}}

	got, err := templates.Whole(context.Background(), live, cached)
	if err != nil {
		t.Fatal(err)
	}
	if live.reads != 0 {
		t.Errorf("read the API server %d times, want none", live.reads)
	}
	if !equalJSON(t, got, whole) {
		t.Errorf("whole job %+v, want %+v", got, whole)
	}
	if !Trimmed(cached) {
		t.Errorf("the cache's object was changed: %+v", cached.Spec.Template)
	}
	// What Whole returns is the caller's: changing it changes nothing kept.
	got.(*batchv1.Job).Spec.Template.Spec.Containers[0].Image = "changed"
	again, _ := templates.Whole(context.Background(), live, cached)
	if img := again.(*batchv1.Job).Spec.Template.Spec.Containers[0].Image; img == "changed" {
		t.Errorf("the kept template was changed through a returned job")
	}

	// A cached job of another version than the kept template is read whole.
	newer := cached.DeepCopy()
	newer.ResourceVersion = "8"
	if _, err := templates.Whole(context.Background(), live, newer); err != nil || live.reads != 1 {
		t.Errorf("another version: %d reads, %v; want one read", live.reads, err)
	}
}

// Only the newest jobs' templates are kept; a new version of a kept job keeps its place.
func TestTheOldestTemplatesGoFirst(t *testing.T) {
	templates := NewTemplates(2)
	live := &liveReads{jobs: map[types.NamespacedName]*batchv1.Job{}}
	cached := map[string]*batchv1.Job{}
	for i, name := range []string{"a", "b", "a", "c"} {
		j := jobNamed(name, fmt.Sprint(i+1))
		live.jobs[client.ObjectKeyFromObject(j)] = j.DeepCopy()
		cached[name] = trimmed(t, templates, j)
	}
	for name, wantRead := range map[string]bool{"a": true, "b": false, "c": false} {
		before := live.reads
		if _, err := templates.Whole(context.Background(), live, cached[name]); err != nil {
			t.Fatal(err)
		}
		if read := live.reads > before; read != wantRead {
			t.Errorf("job %s read from the API server: %v, want %v", name, read, wantRead)
		}
	}
}

// Without Templates, or for a job the cache left whole, Whole behaves as before: a read, or the job.
func TestWholeWithoutKeptTemplates(t *testing.T) {
	var none *Templates
	whole := jobNamed("a", "1")
	live := &liveReads{jobs: map[types.NamespacedName]*batchv1.Job{client.ObjectKeyFromObject(whole): whole}}
	cached, _ := TrimJob(whole.DeepCopy())
	if _, err := none.Trim(whole.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if got, err := none.Whole(context.Background(), live, cached.(client.Object)); err != nil || live.reads != 1 || !equalJSON(t, got, whole) {
		t.Errorf("no templates: %d reads, %v", live.reads, err)
	}
	if got, _ := none.Whole(context.Background(), live, whole); got != whole || live.reads != 1 {
		t.Errorf("a whole job is read again or copied")
	}
}
