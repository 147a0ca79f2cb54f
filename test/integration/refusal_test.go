package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
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
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/dispatch/workersync"
	"github.com/gantry-dev/gantry/jobkind"
)

// refuseJobsIn makes the worker's API server refuse, as invalid, every Job created in the namespace,
// as a policy of the cluster or a webhook of its controller would, until the test ends.
func refuseJobsIn(t *testing.T, cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	c := workers[cluster].client
	name := "refuse-jobs-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "Jobs of this namespace are not run here",
				Reason: ptr.To(metav1.StatusReasonInvalid)}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	for _, obj := range []client.Object{namespace, policy, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.Delete(ctx, binding)
		_ = c.Delete(ctx, policy)
	})
	probe := gpuJob(ns, "probe", 1, 0)
	eventually(t, "the refusal in force on "+cluster, func() error {
		if err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll); !apierrors.IsInvalid(err) {
			return fmt.Errorf("a Job created: %v", err)
		}
		return nil
	})
}

// A job the winner's API server refuses is not asked for again and again: each refusal takes the
// Workload back and dispatches it anew, a cluster that refused it three times is left out, and the
// Workload's evictions say why. Nothing of it is created anywhere.
func TestAJobTheWinnersRefuseIsTakenBackAndSaysWhy(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "refused", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "refused")
	dumpOnFailure(t, ns)
	for _, n := range names {
		refuseJobsIn(t, n, ns)
	}
	job := gpuJob(ns, "refused", 1, 1)
	submit(t, job)

	wl := &gantry.Workload{}
	eventually(t, "every worker to refuse it "+fmt.Sprint(dispatch.MaxEvictionsPerCluster)+" times", func() error {
		key := types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}
		if err := hubEnv.client.Get(ctx, key, wl); err != nil {
			return err
		}
		perCluster := map[string]int{}
		for _, e := range wl.Status.Evictions {
			if e.Reason != gantry.ReasonRemoteJobRefused || !strings.Contains(e.Message, "Jobs of this namespace are not run here") {
				return fmt.Errorf("eviction %+v", e)
			}
			perCluster[e.Cluster]++
		}
		for _, n := range names {
			if perCluster[n] < dispatch.MaxEvictionsPerCluster {
				return fmt.Errorf("evictions per cluster %v", perCluster)
			}
		}
		return nil
	})
	// The last take-back voids the winner at once; the dispatcher's next write says why it waits.
	eventually(t, "the dispatcher to say why it waits", func() error {
		if c := apimeta.FindStatusCondition(hubWorkload(t, job).Status.Conditions, gantry.WorkloadPending); c == nil ||
			c.Status != metav1.ConditionTrue || c.Reason != gantry.ReasonNoClusterCanHold {
			return fmt.Errorf("pending %+v", c)
		}
		return nil
	})
	consistently(t, "no more dispatches, nothing created", 3*time.Second, func() error {
		got := hubWorkload(t, job)
		if len(got.Status.Evictions) != len(wl.Status.Evictions) || got.Status.Winner() != "" {
			return fmt.Errorf("dispatched again: %d evictions, winner %q", len(got.Status.Evictions), got.Status.Winner())
		}
		if c := apimeta.FindStatusCondition(got.Status.Conditions, gantry.WorkloadPending); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("pending %+v", c)
		}
		if where, err := remoteJobs(job); err != nil || len(where) > 0 {
			return fmt.Errorf("a Job on %v (%v)", where, err)
		}
		return nil
	})
	pending := apimeta.FindStatusCondition(hubWorkload(t, job).Status.Conditions, gantry.WorkloadPending)
	if want := "taken back from it 3 times (last: RemoteJobRefused)"; pending.Reason != gantry.ReasonNoClusterCanHold || !strings.Contains(pending.Message, want) {
		t.Errorf("pending %s: %s, want %s saying %q", pending.Reason, pending.Message, gantry.ReasonNoClusterCanHold, want)
	}
	if ev := hubEvents(t, ns, job.Name); !strings.Contains(ev, "refused to create the Job") {
		t.Errorf("events on the hub Job:\n%s", ev)
	}
	var hub batchv1.Job
	if err := hubEnv.client.Get(ctx, client.ObjectKeyFromObject(job), &hub); err != nil || hub.Status.StartTime != nil {
		t.Errorf("the hub Job ran: %+v %v", hub.Status, err)
	}
}

// An agent admits a job only within what the ResourceQuotas of its namespace on that worker leave: a
// quota that could never hold it rejects it there at once, with the quota's words; a quota used up for
// now makes it wait, the hub's Pending message repeating why, until room comes back. Nothing is created
// where the quota would refuse it. The jobs are small beside the worker's nodes, so that what earlier
// tests still hold there (their cleanup may be under way) does not keep the hub from sending them.
func TestAnAgentJudgesTheNamespaceQuotaBeforeItAdmits(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "nsquota", map[string]int64{"worker-1": 16})
	ns := newNamespace(t, "nsquota")
	dumpOnFailure(t, ns)
	c := workers["worker-1"].client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const gpus = corev1.ResourceName("requests." + string(gantry.GPUResource))
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{gpus: resource.MustParse("2")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// The agent reads the quota's status, which the quota controller (not run here) keeps.
	setUsed := func(used string) {
		t.Helper()
		quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{gpus: resource.MustParse(used)}}
		if err := c.Status().Update(ctx, quota); err != nil {
			t.Fatal(err)
		}
	}
	setUsed("2")
	tooBig := gpuJob(ns, "too-big", 1, 4)
	fits := gpuJob(ns, "fits-later", 1, 2)
	submit(t, tooBig)
	submit(t, fits)
	eventually(t, "worker-1 rejecting the job its quota never holds", func() error {
		wl := &gantry.Workload{}
		if err := hubEnv.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, tooBig.Name)}, wl); err != nil {
			return err
		}
		for _, r := range wl.Status.RejectedClusters {
			if r.Name == "worker-1" && r.Reason == gantry.ReasonNamespaceQuotaTooSmall && strings.Contains(r.Message, "allows 2 requests.nvidia.com/gpu; the job needs 4") {
				return nil
			}
		}
		return fmt.Errorf("rejections %+v; pending %+v", wl.Status.RejectedClusters, apimeta.FindStatusCondition(wl.Status.Conditions, gantry.WorkloadPending))
	})
	cond := pendingReason(t, fits, gantry.ReasonWaitingForAdmission)
	eventually(t, "the hub repeating why the other waits", func() error {
		cond = apimeta.FindStatusCondition(hubWorkload(t, fits).Status.Conditions, gantry.WorkloadPending)
		if cond == nil || !strings.Contains(cond.Message, "has 0 requests.nvidia.com/gpu left of 2") {
			return fmt.Errorf("pending %+v", cond)
		}
		return nil
	})
	if where, err := remoteJobs(fits); err != nil || len(where) > 0 {
		t.Fatalf("a Job on %v (%v) while the quota is used up", where, err)
	}
	setUsed("0")
	runsOn(t, fits)
}

// A worker's LimitRange refuses pods, not Jobs: the hub's dry run of the job's pods finds it before the
// Job is created there, and takes the Workload back with the worker's words; no Job is left there to
// sit without pods, which its agent would give up only after its placement timeout.
func TestPodsAWorkerRefusesAreFoundBeforeTheJobIsCreated(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "limits", map[string]int64{"worker-1": 16})
	ns := newNamespace(t, "limits")
	dumpOnFailure(t, ns)
	c := workers["worker-1"].client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	limits := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "gpus", Namespace: ns},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{gantry.GPUResource: resource.MustParse("4")}}}}}
	if err := c.Create(ctx, limits); err != nil {
		t.Fatal(err)
	}
	job := gpuJob(ns, "wide", 1, 8)
	submit(t, job)
	eventually(t, "the Workload taken back from worker-1 with its LimitRange's words", func() error {
		wl := &gantry.Workload{}
		if err := hubEnv.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: jobkind.WorkloadName(jobkind.Job{}, job.Name)}, wl); err != nil {
			return err
		}
		for _, e := range wl.Status.Evictions {
			if e.Cluster == "worker-1" && e.Reason == gantry.ReasonRemoteJobRefused && strings.Contains(e.Message, "maximum nvidia.com/gpu usage per Container is 4") {
				return nil
			}
		}
		return fmt.Errorf("evictions %+v", wl.Status.Evictions)
	})
	if where, err := remoteJobs(job); err != nil || len(where) > 0 {
		t.Fatalf("a Job on %v (%v) whose pods the worker refuses", where, err)
	}
	// Each new epoch is judged anew, and refused; after MaxEvictionsPerCluster the job waits, saying
	// why, for a cluster that can hold it.
	cond := pendingReason(t, job, gantry.ReasonNoClusterCanHold)
	if !strings.Contains(cond.Message, "worker-1: taken back from it 3 times (last: RemoteJobRefused)") {
		t.Errorf("pending %+v", cond)
	}
	if where, err := remoteJobs(job); err != nil || len(where) > 0 {
		t.Fatalf("a Job on %v (%v) whose pods the worker refuses", where, err)
	}
}

// A nominated cluster whose API server does not take the Workload's copy (here its quota on
// Workloads; a namespace being deleted there, a policy) is said within seconds: a Warning Event on the
// hub Job with the worker's words, once. The hub asks again every few seconds, not at the controller's
// backoff, so the job runs soon after the quota is lifted.
func TestACopyAWorkerDoesNotTakeIsSaidAndAskedForAgain(t *testing.T) {
	ctx := context.Background()
	startHub(t)
	newGlobalQueue(t, "copyquota", map[string]int64{"worker-1": 16})
	ns := newNamespace(t, "copyquota")
	dumpOnFailure(t, ns)
	c := workers["worker-1"].client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	const workloads = corev1.ResourceName("count/workloads.gantry.dev")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-workloads", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{workloads: resource.MustParse("0")}}}
	if err := c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	setHard := func(n string) { // the quota controller, which keeps the status, does not run here
		t.Helper()
		quota.Status = corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{workloads: resource.MustParse(n)}, Used: corev1.ResourceList{workloads: resource.MustParse("0")}}
		if err := c.Status().Update(ctx, quota); err != nil {
			t.Fatal(err)
		}
	}
	setHard("0")
	job := gpuJob(ns, "no-copy", 1, 1)
	submit(t, job)
	eventually(t, "a Warning Event saying worker-1 does not take the copy", func() error {
		if evs := hubEvents(t, ns, job.Name); !strings.Contains(evs, "Warning CopyNotCreated: worker-1 does not take the Workload's copy: ") ||
			!strings.Contains(evs, "exceeded quota: no-workloads") {
			return fmt.Errorf("events %q", evs)
		}
		return nil
	})
	time.Sleep(2 * workersync.JobCreateRetry) // asked again twice meanwhile
	var events corev1.EventList
	if err := hubEnv.client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == workersync.EventCopyNotCreated && (e.Series != nil || e.Count > 1) {
			t.Errorf("CopyNotCreated said again: %+v, count %d", e.Series, e.Count)
		}
	}
	quota.Spec.Hard[workloads] = resource.MustParse("10")
	if err := c.Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	setHard("10")
	runsOn(t, job)
}
