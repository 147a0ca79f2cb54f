package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/helmchart"
	"github.com/gantry-dev/gantry/jobkind"
)

// A gang sent to a worker that serves the PodGroup API gets a PodGroup there, made by the worker's agent
// with its admission and owned by the copy, and the Job Gantry creates makes its pods join it; the
// chart's policy makes a pod that carries only the label join it too. Once the gang was placed whole, a
// pod that comes after it lowers the quorum to one. On a worker without the API nothing changes.
func TestAGangGetsAPodGroupWhereTheWorkerServesThem(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	w := workers[jobSetWorker]
	newGlobalQueue(t, "gangs", map[string]int64{jobSetWorker: 16})
	ns := newNamespace(t, "gangs")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "gang", 2, 4)
	submit(t, job)
	if on := runsOn(t, job); on != jobSetWorker {
		t.Fatalf("runs on %s, want %s", on, jobSetWorker)
	}

	var cp gantry.Workload
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Status.Admission == nil || cp.Status.Admission.PodGroup == "" {
		t.Fatalf("the copy's admission %+v names no PodGroup", cp.Status.Admission)
	}
	name := cp.Status.Admission.PodGroup
	var pg schedulingv1beta1.PodGroup
	if err := w.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pg); err != nil {
		t.Fatal(err)
	}
	if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 2 {
		t.Errorf("PodGroup %s policy %+v, want a gang of 2", name, pg.Spec.SchedulingPolicy)
	}
	if ref := metav1.GetControllerOf(&pg); ref == nil || ref.UID != cp.UID || ref.Kind != "Workload" {
		t.Errorf("PodGroup %s is controlled by %+v, want the copy %s", name, ref, cp.UID)
	}
	var remote batchv1.Job
	if err := w.client.Get(ctx, client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatal(err)
	}
	tpl := remote.Spec.Template
	if tpl.Labels[gantry.PodGroupLabel] != name || tpl.Spec.SchedulingGroup == nil || ptr.Deref(tpl.Spec.SchedulingGroup.PodGroupName, "") != name {
		t.Errorf("the Job's pods join label %q, group %+v; want %s", tpl.Labels[gantry.PodGroupLabel], tpl.Spec.SchedulingGroup, name)
	}

	podJoinsByLabel(t, w, ns, name)
	laterPodLowersTheQuorum(t, w, ns, name, tpl)
}

// podJoinsByLabel installs the chart's gantry-pod-group policy on the worker and creates (in a dry run)
// a pod that carries only the label, as a JobSet's or RayJob's pods do: the API server makes it join.
func podJoinsByLabel(t *testing.T, w *cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	ch, err := helmchart.Load(filepath.Join(repoRoot(), "deploy", "charts", "gantry"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := helmchart.Render(ch, helmchart.Namespace, map[string]any{"role": "agent", "agent": map[string]any{"clusterName": w.name}})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := helmchart.Objects(docs)
	if err != nil {
		t.Fatal(err)
	}
	installed := 0
	for _, u := range objs {
		if u.GetName() != "gantry-pod-group" {
			continue
		}
		if err := w.client.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.client.Delete(context.Background(), u) })
		installed++
	}
	if installed != 2 {
		t.Fatalf("the chart rendered %d objects named gantry-pod-group, want the policy and its binding", installed)
	}
	eventually(t, "a pod labelled for the gang joins it", func() error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: ns, Labels: map[string]string{gantry.PodGroupLabel: name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := w.client.Create(ctx, pod, client.DryRunAll); err != nil {
			return err
		}
		if g := pod.Spec.SchedulingGroup; g == nil || ptr.Deref(g.PodGroupName, "") != name {
			return fmt.Errorf("schedulingGroup %+v", g)
		}
		return nil
	})
}

// laterPodLowersTheQuorum plays the worker's Job controller and scheduler: both pods of the gang bound
// and finished, then a replacement that waits. The agent lowers the PodGroup's quorum to one pod.
func laterPodLowersTheQuorum(t *testing.T, w *cluster, ns, name string, tpl corev1.PodTemplateSpec) {
	t.Helper()
	ctx := context.Background()
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gang-%d", i), Namespace: ns, Labels: tpl.Labels}, Spec: *tpl.Spec.DeepCopy()}
	}
	for i := range 2 {
		p := pod(i)
		p.Spec.NodeName = fmt.Sprintf("%s-gpu-%d", w.name, i)
		if err := w.client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodSucceeded
		if err := w.client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	quorumIs := func(want int32) func() error {
		return func() error {
			var pg schedulingv1beta1.PodGroup
			if err := w.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &pg); err != nil {
				return err
			}
			if n := pg.Spec.SchedulingPolicy.Gang.MinCount; n != want {
				return fmt.Errorf("quorum %d, want %d", n, want)
			}
			return nil
		}
	}
	consistently(t, "the quorum while nothing waits", 2*time.Second, quorumIs(2))
	if err := w.client.Create(ctx, pod(2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the quorum lowered for the replacement", quorumIs(1))
}

// A worker without the PodGroup API admits the gang without one, and its Job's pods join none.
func TestAGangOnAWorkerWithoutPodGroupsJoinsNone(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	const plain = "worker-2"
	newGlobalQueue(t, "no-gangs", map[string]int64{plain: 16})
	ns := newNamespace(t, "no-gangs")
	job := gpuJob(ns, "gang", 2, 4)
	submit(t, job)
	if on := runsOn(t, job); on != plain {
		t.Fatalf("runs on %s, want %s", on, plain)
	}
	if a := hubWorkload(t, job).Status.Admission; a != nil && a.PodGroup != "" {
		t.Errorf("admission %+v names a PodGroup on a worker that serves none", a)
	}
	var remote batchv1.Job
	if err := workers[plain].client.Get(ctx, client.ObjectKeyFromObject(job), &remote); err != nil {
		t.Fatal(err)
	}
	if tpl := remote.Spec.Template; tpl.Spec.SchedulingGroup != nil || tpl.Labels[gantry.PodGroupLabel] != "" {
		t.Errorf("the Job's pods join %+v / %q on a worker without PodGroups", tpl.Spec.SchedulingGroup, tpl.Labels[gantry.PodGroupLabel])
	}
}
