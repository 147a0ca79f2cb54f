package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
	"github.com/gantry-dev/gantry/test/e2e/testbed"
)

// queueName is the Queue every test namespace gets; it points at the testbed's GlobalQueue "default"
// (hack/testbed/hub-objects.yaml), which spans both workers.
const queueName = "default"

// poll is how often a test looks again at what it waits for: often enough that a step seen done
// costs the test little, on loopback API servers that answer in milliseconds.
const poll = 250 * time.Millisecond

// eventually polls cond every interval until it returns nil, and fails the test with the last error
// once timeout has passed.
func eventually(t *testing.T, what string, timeout, interval time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(interval)
	}
}

// newNamespace creates a namespace on the hub with the Queue the tests' Jobs name.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	if err := tb.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	q := &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: queueName, Namespace: name}, Spec: gantry.QueueSpec{GlobalQueue: "default"}}
	if err := tb.Hub.Client.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	// A test that failed half-way leaves no work behind to hold room the next tests count on.
	t.Cleanup(func() {
		_ = tb.Hub.Client.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(name),
			client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	return name
}

// jobBuilder builds a GPU Job submitted to the test Queue, whose pods run on kwok for a fixed time.
type jobBuilder struct{ job *batchv1.Job }

// kwokStart has kwok's two stages before a pod runs (pod-create, pod-ready; hack/testbed/stages.yaml)
// take 1-2 s each instead of kwok's 1-5 s: a pod still starts after a random delay, in 2-4 s, and a
// test that runs jobs in waves waits less for each wave.
func kwokStart() map[string]string {
	a := map[string]string{}
	for _, stage := range []string{"pod-create", "pod-ready"} {
		a[stage+".stage.kwok.x-k8s.io/delay"] = "1s"
		a[stage+".stage.kwok.x-k8s.io/jitter-delay"] = "2s"
	}
	return a
}

func makeJob(ns, name string) *jobBuilder {
	return &jobBuilder{job: &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: queueName}},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To[int32](1),
			Completions:  ptr.To[int32](1),
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: kwokStart()}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "train", Image: "registry.example/gpu-job:1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
					},
				}},
			}},
		},
	}}
}

// pods sets how many pods run at once and must all succeed: a gang.
func (b *jobBuilder) pods(n int32) *jobBuilder {
	b.job.Spec.Parallelism, b.job.Spec.Completions = ptr.To(n), ptr.To(n)
	return b
}

// gpus sets the GPUs of each pod.
func (b *jobBuilder) gpus(n int64) *jobBuilder {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	c := &b.job.Spec.Template.Spec.Containers[0]
	c.Resources.Requests[gantry.GPUResource], c.Resources.Limits[gantry.GPUResource] = q, q
	return b
}

// runsFor makes each pod succeed after d on its kwok node (kwok's pod-complete stage).
func (b *jobBuilder) runsFor(d string) *jobBuilder {
	b.job.Spec.Template.Annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = d
	b.job.Spec.Template.Annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] = d
	return b
}

// stopsWithin gives the pods a termination grace period of that many seconds: kwok removes a deleted
// pod at a random moment within its grace period (30 s by default), which a test that waits for the
// pods of a deleted or suspended Job to go waits out.
func (b *jobBuilder) stopsWithin(seconds int64) *jobBuilder {
	b.job.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(seconds)
	return b
}

func (b *jobBuilder) nodeSelector(key, value string) *jobBuilder {
	b.job.Spec.Template.Spec.NodeSelector = map[string]string{key: value}
	return b
}

// gpuProducts sets the GPU products the pods accept, in order of preference.
func (b *jobBuilder) gpuProducts(products ...string) *jobBuilder {
	if b.job.Annotations == nil {
		b.job.Annotations = map[string]string{}
	}
	b.job.Annotations[gantry.GPUProductsAnnotation] = strings.Join(products, ",")
	return b
}

func (b *jobBuilder) obj() *batchv1.Job { return b.job }

// submit creates the Job on the hub.
func submit(t *testing.T, job *batchv1.Job) {
	t.Helper()
	if err := tb.Hub.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("submitting job %s: %v", job.Name, err)
	}
}

func jobCondition(job *batchv1.Job, typ batchv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// allComplete waits until every Job shows Complete on the hub, and fails at once when one failed.
func allComplete(t *testing.T, submitted []*batchv1.Job, timeout time.Duration) {
	t.Helper()
	ns := submitted[0].Namespace
	eventually(t, fmt.Sprintf("%d hub jobs in %s complete", len(submitted), ns), timeout, poll, func() error {
		var list batchv1.JobList
		if err := tb.Hub.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		byName := map[string]*batchv1.Job{}
		for i := range list.Items {
			byName[list.Items[i].Name] = &list.Items[i]
		}
		var waiting []string
		for _, s := range submitted {
			j, ok := byName[s.Name]
			switch {
			case !ok:
				t.Fatalf("hub job %s disappeared", s.Name)
			case jobCondition(j, batchv1.JobFailed):
				t.Fatalf("hub job %s failed: %+v", s.Name, j.Status)
			case !jobCondition(j, batchv1.JobComplete):
				waiting = append(waiting, s.Name)
			}
		}
		if len(waiting) > 0 {
			return fmt.Errorf("not complete yet: %s", strings.Join(waiting, " "))
		}
		return nil
	})
}

// hubWorkload is the hub Workload of the job, waiting a while for one just submitted.
func hubWorkload(t *testing.T, job *batchv1.Job) *gantry.Workload {
	t.Helper()
	var wl gantry.Workload
	key := types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}
	// A job just submitted gets its Workload a moment later.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(poll) {
		err := tb.Hub.Client.Get(context.Background(), key, &wl)
		if err == nil {
			return &wl
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("getting the hub workload of %s: %v", job.Name, err)
		}
	}
}

// winnerOf returns the cluster the hub recorded as the job's winner; an error until there is one.
func winnerOf(job *batchv1.Job) (string, error) {
	var wl gantry.Workload
	key := types.NamespacedName{Namespace: job.Namespace, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}
	if err := tb.Hub.Client.Get(context.Background(), key, &wl); err != nil {
		return "", err
	}
	if wl.Status.ClusterName == "" {
		return "", fmt.Errorf("no winner for %s yet", job.Name)
	}
	return wl.Status.ClusterName, nil
}

// jobAudit is what the workers' etcd recorded about the Jobs of one namespace.
type jobAudit struct {
	created map[string][]string // job name -> clusters where the Job was created, once per creation
	deleted map[string][]string // job name -> clusters where the Job was deleted
}

// auditJobs waits until the etcd audit caught up and summarises it for a namespace.
func auditJobs(t *testing.T, ns string) jobAudit {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatalf("syncing the etcd job audit: %v", err)
	}
	a := jobAudit{created: map[string][]string{}, deleted: map[string][]string{}}
	for _, r := range audit.Records(ns) {
		if r.Created {
			a.created[r.Name] = append(a.created[r.Name], r.Cluster)
		} else {
			a.deleted[r.Name] = append(a.deleted[r.Name], r.Cluster)
		}
	}
	return a
}

// checkOneRun waits until the ledger caught up and checks, over every pod ever written on the workers
// in the namespace, that no job ran in two places at once or ran to completion twice; and over every
// state of the namespace's hub Jobs and Workloads, that each job reached one terminal state and each
// Workload had one winner per epoch.
func checkOneRun(t *testing.T, ns string) {
	t.Helper()
	if err := audit.Sync(context.Background()); err != nil {
		t.Fatalf("syncing the etcd ledger: %v", err)
	}
	pods := audit.Pods(ns)
	if len(pods) == 0 {
		t.Fatalf("the ledger saw no pod of Gantry's in %s", ns)
	}
	if err := testbed.CheckOneRun(pods); err != nil {
		t.Errorf("the etcd ledger shows a job in two places:\n%v", err)
	}
	if err := testbed.CheckHubHistory(audit.Hub(ns)); err != nil {
		t.Errorf("the hub's etcd ledger shows a broken promise:\n%v", err)
	}
}

// workerJobGone reports nil once the Job no longer exists on the cluster.
func workerJobGone(cluster *testbed.Cluster, job *batchv1.Job) error {
	var j batchv1.Job
	err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &j)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case j.DeletionTimestamp != nil:
		return fmt.Errorf("job %s on %s is being deleted", job.Name, cluster.Name)
	default:
		return fmt.Errorf("job %s still exists on %s", job.Name, cluster.Name)
	}
}

// dumpOnFailure logs where dispatch stood when a test fails: hub Workloads, worker copies, the etcd
// audit and the end of the hub's log.
func dumpOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx := context.Background()
		var wls gantry.WorkloadList
		_ = tb.Hub.Client.List(ctx, &wls, client.InNamespace(ns))
		for i, wl := range wls.Items {
			t.Logf("hub workload %s: epoch=%d nominated=%v cluster=%q rejected=%v conditions=%s",
				wl.Name, wl.Status.DispatchEpoch, wl.Status.NominatedClusters, wl.Status.ClusterName,
				wl.Status.RejectedClusters, conditions(wl.Status.Conditions))
			if c := apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending); i == 0 && c != nil {
				t.Logf("  pending: %s", c.Message)
			}
			for _, e := range wl.Status.Evictions {
				t.Logf("  evicted from %s in epoch %d at %s: %s: %s", e.Cluster, e.Epoch, e.Time.UTC().Format("15:04:05"), e.Reason, e.Message)
			}
		}
		var wcs gantry.WorkerClusterList
		_ = tb.Hub.Client.List(ctx, &wcs)
		for _, wc := range wcs.Items {
			for _, c := range wc.Status.Conditions {
				t.Logf("WorkerCluster %s: %s=%s (%s) %s", wc.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, w := range tb.Workers {
			var cps gantry.WorkloadList
			_ = w.Client.List(ctx, &cps, client.InNamespace(ns))
			for _, cp := range cps.Items {
				t.Logf("copy on %s %s: epoch=%s %s", w.Name, cp.Name, cp.Labels[gantry.DispatchEpochLabel], conditions(cp.Status.Conditions))
			}
		}
		for _, r := range audit.Records(ns) {
			t.Logf("etcd audit: %s job %s created=%v rev=%d", r.Cluster, r.Name, r.Created, r.Revision)
		}
		t.Logf("end of gantry-hub.log:\n%s", tail(filepath.Join(tb.Dir, "logs", "gantry-hub.log"), 40))
	})
}

func conditions(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
