package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// KubeRay's labels on what it makes for a RayCluster, and its finalizer on a RayJob it took on.
const (
	rayClusterLabel  = "ray.io/cluster"
	rayNodeTypeLabel = "ray.io/node-type"
	rayCreatedBy     = "app.kubernetes.io/created-by"
	rayJobFinalizer  = "ray.io/rayjob-finalizer"
)

// A RayJob submitted to the hub runs on one worker under the real KubeRay operator, as far as kwok lets
// it: the operator brings up its Ray cluster there (a head and a GPU worker pod, Ready on kwok nodes)
// and its submitter Job, and the RayJob reaches Running, which comes back to the hub's RayJob. kwok's
// pods run no Ray, so KubeRay never reads the Ray job's end: the submitter pod "runs" for ten minutes,
// and the test stops there. Deleting the hub's RayJob removes the RayJob, the Ray cluster, the
// submitter Job and every pod from the worker. Over the whole history (the workers' etcd), the RayJob,
// its RayCluster, its submitter Job and its pods existed on the winner only.
func TestRayJobRunsOnOneWorkerUnderKubeRay(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "rayjob-hub")
	dumpOnFailure(t, ns)
	hub := rayClient(t, tb.Hub)
	history := watchObjects(t, ns, "ray.io")
	rj := makeRayJob(ns, "tune")
	submitted := time.Now()
	if err := hub.Create(ctx, rj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Delete(context.Background(), rj) })
	if !rj.Spec.Suspend || rj.Spec.ManagedBy != nil {
		t.Fatalf("the hub's policy did not hold the RayJob: suspend %v, managedBy %v", rj.Spec.Suspend, rj.Spec.ManagedBy)
	}

	workers := map[string]client.Client{}
	for _, w := range tb.Workers {
		workers[w.Name] = rayClient(t, w)
	}
	winner := rayJobWinner(t, workers, rj)
	t.Logf("the hub created the RayJob on %s %s after its submission", winner, since(submitted))
	worker := workers[winner]
	rayCluster := kubeRayRunsIt(t, worker, rj)
	t.Logf("KubeRay on %s: Ray cluster %s ready and the RayJob Running %s after the submission", winner, rayCluster, since(submitted))
	hubSeesRunning(t, hub, worker, rj)
	t.Logf("the hub's RayJob Running %s after the submission", since(submitted))

	deleted := time.Now()
	if err := hub.Delete(ctx, rj); err != nil {
		t.Fatal(err)
	}
	kubeRayObjectsGone(t, worker, rj, rayCluster)
	t.Logf("the RayJob, its Ray cluster, submitter Job and pods gone from %s %s after the hub's RayJob was deleted", winner, since(deleted))
	eventually(t, "the hub's RayJob and Workload gone", time.Minute, poll, func() error {
		key := types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.RayJob{}, rj.Name)}
		if err := tb.Hub.Client.Get(ctx, key, &gantry.Workload{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Workload is still there: %v", err)
		}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(rj), &ray.RayJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the RayJob is still there: %v", err)
		}
		return nil
	})

	onWinnerOnly(t, history, ns, winner, "rayjobs/"+rj.Name, "rayclusters/"+rayCluster)
	gangJoined(t, ns, "submitter")
}

// submitterRunsFor is how long the submitter pod "runs" on its kwok node: longer than the test, so the
// RayJob stays Running (once that pod has ended, KubeRay fails the RayJob at least 30 s later, having
// read no end of the Ray job).
const submitterRunsFor = "10m"

// kwokStartStages are kwok's pod stages before a pod runs (hack/testbed/stages.yaml). Each waits 1 s
// plus up to 5 s of jitter unless the pod's annotations say otherwise.
var kwokStartStages = []string{"pod-create", "pod-init-container-running", "pod-init-container-completed", "pod-ready"}

// makeRayJob builds a RayJob for the test Queue: a head, one worker with a GPU, and its own submitter
// template, whose pod runs for submitterRunsFor. Each pod starts within about a second a stage: KubeRay
// makes the submitter pod only once the Ray cluster is ready (KubeRay's worker pods have an init
// container, four stages), and the agent gives up a gang whose pods are not all on nodes within the
// suite's placement timeout (testbed.PlacementTimeout, 15 s), which kwok's default jitter could reach.
func makeRayJob(ns, name string) *ray.RayJob {
	pod := func(container string, cpu string, gpus int64) corev1.PodTemplateSpec {
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("2Gi")}
		if gpus > 0 {
			res[gantry.GPUResource] = *resource.NewQuantity(gpus, resource.DecimalSI)
		}
		annotations := map[string]string{}
		for _, stage := range kwokStartStages {
			annotations[stage+".stage.kwok.x-k8s.io/delay"] = "1s"
			annotations[stage+".stage.kwok.x-k8s.io/jitter-delay"] = "1s"
		}
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: container, Image: "registry.example/ray:2.46.0",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
			}}},
		}
	}
	submitter := pod("ray-job-submitter", "500m", 0)
	submitter.Spec.RestartPolicy = corev1.RestartPolicyNever
	submitter.Annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = submitterRunsFor
	submitter.Annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] = submitterRunsFor
	return &ray.RayJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: queueName}},
		Spec: ray.RayJobSpec{
			Entrypoint: "python tune.py",
			RayClusterSpec: &ray.RayClusterSpec{
				HeadGroupSpec: ray.HeadGroupSpec{Template: pod("ray-head", "1", 0), RayStartParams: map[string]string{}},
				WorkerGroupSpecs: []ray.WorkerGroupSpec{{
					GroupName: "gpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1),
					Template: pod("ray-worker", "1", 1), RayStartParams: map[string]string{},
				}},
			},
			SubmitterPodTemplate: &submitter,
		},
	}
}

// rayClient is a client of the cluster that knows KubeRay's kinds besides the suite's.
func rayClient(t *testing.T, c *testbed.Cluster) client.Client {
	t.Helper()
	scheme, err := testbed.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := ray.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("a client for %s: %v", c.Name, err)
	}
	return cl
}

// rayJobWinner waits until the hub's Workload names a winner and the RayJob exists there, unsuspended
// and with the submitter's template written out, and returns the winner.
func rayJobWinner(t *testing.T, workers map[string]client.Client, rj *ray.RayJob) string {
	t.Helper()
	var winner string
	eventually(t, "the RayJob on its winner", 90*time.Second, 200*time.Millisecond, func() error {
		var wl gantry.Workload
		key := types.NamespacedName{Namespace: rj.Namespace, Name: jobkind.WorkloadName(jobkind.RayJob{}, rj.Name)}
		if err := tb.Hub.Client.Get(context.Background(), key, &wl); err != nil {
			return err
		}
		if winner = wl.Status.ClusterName; winner == "" {
			return fmt.Errorf("no winner yet: %s", conditions(wl.Status.Conditions))
		}
		var got ray.RayJob
		if err := workers[winner].Get(context.Background(), client.ObjectKeyFromObject(rj), &got); err != nil {
			return err
		}
		if got.Spec.Suspend || got.Spec.SubmitterPodTemplate == nil {
			return fmt.Errorf("not KubeRay's to run: suspend %v, submitter template %v", got.Spec.Suspend, got.Spec.SubmitterPodTemplate != nil)
		}
		return nil
	})
	return winner
}

// kubeRayRunsIt waits until the operator on the worker took the RayJob on (its finalizer), brought up
// its Ray cluster (state ready: the head and the worker pod Ready on kwok nodes, each labelled with its
// pod set), created the submitter Job, whose pod runs, and set the RayJob Running. It returns the
// RayCluster's name.
func kubeRayRunsIt(t *testing.T, worker client.Client, rj *ray.RayJob) string {
	t.Helper()
	ctx := context.Background()
	var got ray.RayJob
	eventually(t, "KubeRay's RayJob Running", 2*time.Minute, poll, func() error {
		if err := worker.Get(ctx, client.ObjectKeyFromObject(rj), &got); err != nil {
			return err
		}
		if got.Status.JobDeploymentStatus != ray.JobDeploymentStatusRunning {
			return fmt.Errorf("deployment status %q (%s %s)", got.Status.JobDeploymentStatus, got.Status.Reason, got.Status.Message)
		}
		return nil
	})
	if !slices.Contains(got.Finalizers, rayJobFinalizer) || got.Status.RayClusterName == "" || got.Status.JobId == "" || got.Status.StartTime == nil {
		t.Fatalf("a Running RayJob that KubeRay did not take on: finalizers %v, status %+v", got.Finalizers, got.Status)
	}
	var rc ray.RayCluster
	if err := worker.Get(ctx, types.NamespacedName{Namespace: rj.Namespace, Name: got.Status.RayClusterName}, &rc); err != nil {
		t.Fatalf("the RayJob's Ray cluster: %v", err)
	}
	if !apimeta.IsStatusConditionTrue(rc.Status.Conditions, string(ray.RayClusterProvisioned)) || !metav1.IsControlledBy(&rc, &got) {
		t.Fatalf("Ray cluster %s: conditions %+v, owners %v; want it provisioned, owned by the RayJob", rc.Name, rc.Status.Conditions, rc.OwnerReferences)
	}
	want := map[string]string{"head": "head", "worker": "gpu"} // KubeRay's node type -> Gantry's pod set
	for _, p := range readyRayPods(t, worker, rj.Namespace, client.MatchingLabels{rayClusterLabel: rc.Name}, 2) {
		if set := want[p.Labels[rayNodeTypeLabel]]; set == "" || p.Labels[gantry.PodSetLabel] != set {
			t.Errorf("pod %s: node type %q, pod set %q", p.Name, p.Labels[rayNodeTypeLabel], p.Labels[gantry.PodSetLabel])
		}
	}
	var submitter batchv1.Job
	if err := worker.Get(ctx, client.ObjectKeyFromObject(rj), &submitter); err != nil || submitter.Labels[rayCreatedBy] != "kuberay-operator" {
		t.Fatalf("KubeRay's submitter Job: %v, labels %v", err, submitter.Labels)
	}
	for _, p := range readyRayPods(t, worker, rj.Namespace, client.MatchingLabels{"job-name": submitter.Name}, 1) {
		if p.Labels[gantry.PodSetLabel] != "submitter" {
			t.Errorf("submitter pod %s: pod set %q", p.Name, p.Labels[gantry.PodSetLabel])
		}
	}
	return rc.Name
}

// readyRayPods waits until n pods match, all Running and Ready on the worker's kwok nodes, and returns
// them.
func readyRayPods(t *testing.T, worker client.Client, ns string, match client.MatchingLabels, n int) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	if err := worker.List(ctx, &nodes, client.MatchingLabels{"type": "kwok"}); err != nil {
		t.Fatal(err)
	}
	kwok := map[string]bool{}
	for _, n := range nodes.Items {
		kwok[n.Name] = true
	}
	var pods corev1.PodList
	eventually(t, fmt.Sprintf("%d pods %v Ready", n, match), time.Minute, poll, func() error {
		if err := worker.List(ctx, &pods, client.InNamespace(ns), match); err != nil {
			return err
		}
		if len(pods.Items) != n {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) || !kwok[p.Spec.NodeName] {
				return fmt.Errorf("pod %s: %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName)
			}
		}
		return nil
	})
	return pods.Items
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hubSeesRunning waits until the hub's RayJob shows the worker's status: Running, the same Ray cluster
// and job ID; it stays suspended, the hub's policy's to keep.
func hubSeesRunning(t *testing.T, hub, worker client.Client, rj *ray.RayJob) {
	t.Helper()
	ctx := context.Background()
	var remote ray.RayJob
	if err := worker.Get(ctx, client.ObjectKeyFromObject(rj), &remote); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hub's RayJob Running", time.Minute, poll, func() error {
		var got ray.RayJob
		if err := hub.Get(ctx, client.ObjectKeyFromObject(rj), &got); err != nil {
			return err
		}
		st := got.Status
		if st.JobDeploymentStatus != ray.JobDeploymentStatusRunning || st.RayClusterName != remote.Status.RayClusterName ||
			st.JobId != remote.Status.JobId || st.DashboardURL != remote.Status.DashboardURL || st.StartTime == nil {
			return fmt.Errorf("hub status %+v, worker status %+v", st, remote.Status)
		}
		if !got.Spec.Suspend {
			t.Fatalf("the hub's RayJob is no longer suspended")
		}
		return nil
	})
}

// kubeRayObjectsGone waits until the RayJob, its Ray cluster, its submitter Job and every pod of the
// test namespace are gone from the worker.
func kubeRayObjectsGone(t *testing.T, worker client.Client, rj *ray.RayJob, rayCluster string) {
	t.Helper()
	ctx := context.Background()
	gone := func(obj client.Object, key types.NamespacedName) error {
		err := worker.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%T %s still there: %v", obj, key.Name, err)
	}
	eventually(t, "KubeRay's objects gone from the worker", 2*time.Minute, poll, func() error {
		key := client.ObjectKeyFromObject(rj)
		if err := errors.Join(gone(&ray.RayJob{}, key), gone(&batchv1.Job{}, key),
			gone(&ray.RayCluster{}, types.NamespacedName{Namespace: rj.Namespace, Name: rayCluster})); err != nil {
			return err
		}
		var pods corev1.PodList
		if err := worker.List(ctx, &pods, client.InNamespace(rj.Namespace)); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left, %s first", len(pods.Items), pods.Items[0].Name)
		}
		return nil
	})
}

// onWinnerOnly checks the whole history of the namespace on the workers: the ray.io objects the test
// expects (resource/name) were created on the winner only, once, and nothing else of KubeRay's was;
// every pod of Gantry's (head, worker, submitter) and the submitter Job lived on the winner only; and
// the ledger's promises hold.
func onWinnerOnly(t *testing.T, history *groupObjects, ns, winner string, expected ...string) {
	t.Helper()
	history.createdOnlyOn(t, winner, expected...)
	checkOneRun(t, ns)
	sets := map[string]bool{}
	for _, p := range audit.Pods(ns) {
		if p.Cluster != winner {
			t.Errorf("pod %s of pod set %q on %s", p.Name, p.PodSet, p.Cluster)
		}
		sets[p.PodSet] = true
	}
	if !sets["head"] || !sets["gpu"] || !sets["submitter"] || len(sets) != 3 {
		t.Errorf("pod records by pod set %v, want head, gpu and submitter", sets)
	}
	jobsOnlyOn(t, ns, winner)
}

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
