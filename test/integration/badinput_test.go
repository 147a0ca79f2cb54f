package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/test/testcluster"
)

func TestJobNamingAMissingQueueWaitsWithAReason(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "missing", map[string]int64{"worker-1": 8})
	ns := newNamespace(t, "missing")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "lost", 1, 1)
	job.Labels[gantry.QueueLabel] = "no-such-queue"
	submit(t, job)
	cond := pendingReason(t, job, gantry.ReasonQueueNotFound)
	if !strings.Contains(cond.Message, `"no-such-queue"`) {
		t.Errorf("condition message %q does not name the queue", cond.Message)
	}
	eventually(t, "warning event on the hub job", func() error {
		if ev := hubEvents(t, ns, job.Name); !strings.Contains(ev, "Warning Pending: QueueNotFound") {
			return fmt.Errorf("events: %q", ev)
		}
		return nil
	})
	consistently(t, "the job stays suspended on the hub and goes nowhere", time.Second, func() error {
		var j batchv1.Job
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		if !ptr.Deref(j.Spec.Suspend, false) {
			return fmt.Errorf("hub job is not suspended")
		}
		if where, err := remoteJobs(job); err != nil || len(where) > 0 {
			return fmt.Errorf("job on %v (%v)", where, err)
		}
		return nil
	})
}

func TestJobNoClusterCanHold(t *testing.T) {
	startHub(t)
	newGlobalQueue(t, "toobig", map[string]int64{"worker-1": 8, "worker-2": 64})
	ns := newNamespace(t, "toobig")
	dumpOnFailure(t, ns)

	// Beyond every cluster's quota: the hub knows at once.
	overQuota := gpuJob(ns, "over-quota", 8, 16)
	submit(t, overQuota)
	cond := pendingReason(t, overQuota, gantry.ReasonNoClusterCanHold)
	for _, want := range []string{"worker-1: needs 128 nvidia.com/gpu, quota is 8", "worker-2: needs 128 nvidia.com/gpu, quota is 64"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("message %q lacks %q", cond.Message, want)
		}
	}

	// Within quota, but no node anywhere has 16 GPUs: both agents reject it.
	tooWide := gpuJob(ns, "too-wide", 1, 16)
	submit(t, tooWide)
	cond = pendingReason(t, tooWide, gantry.ReasonNoClusterCanHold)
	if !strings.Contains(cond.Message, "worker-2: rejected by its agent") {
		t.Errorf("message %q does not say the agents rejected it", cond.Message)
	}
	wl := hubWorkload(t, tooWide)
	if len(wl.Status.RejectedClusters) == 0 || wl.Status.RejectedClusters[0].Reason != gantry.ReasonNeverFits {
		t.Errorf("rejected clusters %+v, want NeverFits", wl.Status.RejectedClusters)
	}
}

func TestBadKubeconfigsAreReportedAndOthersKeepWorking(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	goodConfig, err := testcluster.Kubeconfig(workers["worker-1"].cfg)
	if err != nil {
		t.Fatal(err)
	}
	withExec := strings.Replace(string(goodConfig), "users:\n- name: u\n  user:\n",
		"users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      interactiveMode: Never\n", 1)
	withTokenFile := strings.Replace(string(goodConfig), "users:\n- name: u\n  user:\n", "users:\n- name: u\n  user:\n    tokenFile: /etc/hostname\n", 1)
	unreachable := strings.Replace(string(goodConfig), workers["worker-1"].cfg.Host, "https://127.0.0.1:1", 1)
	cases := map[string]struct {
		data   map[string][]byte // nil: no Secret at all
		reason string
	}{
		"bad-missing":     {reason: gantry.ReasonSecretNotFound},
		"bad-empty":       {data: map[string][]byte{"other": []byte("x")}, reason: gantry.ReasonInvalidKubeconfig},
		"bad-malformed":   {data: map[string][]byte{workerconfig.SecretKey: []byte("{not yaml: [")}, reason: gantry.ReasonInvalidKubeconfig},
		"bad-exec":        {data: map[string][]byte{workerconfig.SecretKey: []byte(withExec)}, reason: gantry.ReasonInsecureKubeconfig},
		"bad-token-file":  {data: map[string][]byte{workerconfig.SecretKey: []byte(withTokenFile)}, reason: gantry.ReasonInsecureKubeconfig},
		"bad-unreachable": {data: map[string][]byte{workerconfig.SecretKey: []byte(unreachable)}, reason: gantry.ReasonUnreachable},
	}
	for name, tc := range cases {
		registerWithSecret(t, name, tc.data)
	}
	for name, tc := range cases {
		eventually(t, name+" reported", func() error {
			var wc gantry.WorkerCluster
			if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &wc); err != nil {
				return err
			}
			c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason || c.Message == "" {
				return fmt.Errorf("connected condition %+v, want False/%s", c, tc.reason)
			}
			return nil
		})
	}
	// The hub keeps serving the good clusters.
	newGlobalQueue(t, "survivor", map[string]int64{"worker-1": 8, "worker-2": 8})
	ns := newNamespace(t, "survivor")
	job := gpuJob(ns, "still-runs", 1, 1)
	submit(t, job)
	runsOn(t, job)
}

func TestInvalidGlobalQueuesAreRejected(t *testing.T) {
	ctx := context.Background()
	gpus := func(q string) corev1.ResourceList {
		return corev1.ResourceList{gantry.GPUResource: resource.MustParse(q)}
	}
	cases := map[string]struct {
		clusters []gantry.ClusterQuota
		deadline *metav1.Duration
		cohort   string
		dispatch gantry.DispatchPolicy
		weight   *int32
		preempt  gantry.PreemptionPolicy
		want     string
	}{
		"negative quota": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("-4")}},
			want:     "quota must not be negative",
		},
		"cluster listed twice": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}, {Name: "worker-1", Quota: gpus("8")}},
			want:     "each cluster may be listed only once",
		},
		"no clusters": {
			want: "spec.clusters",
		},
		"more clusters than a queue may list": {
			clusters: manyClusters(257, gpus("1")),
			want:     "must have at most 256 items",
		},
		"an admission deadline of no time": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}}, deadline: &metav1.Duration{},
			want: "admissionDeadline must be positive",
		},
		"limits without a cohort": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4"), LendingLimit: gpus("2")}},
			want:     "borrowingLimit and lendingLimit need a cohort",
		},
		"lending what the quota does not limit": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4"),
				LendingLimit: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}, cohort: "research",
			want: "lendingLimit may name only resources of quota",
		},
		"borrowing what the quota does not limit": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4"),
				BorrowingLimit: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}}, cohort: "research",
			want: "borrowingLimit may name only resources of quota",
		},
		"a negative borrowing limit": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4"), BorrowingLimit: gpus("-1")}}, cohort: "research",
			want: "borrowingLimit must not be negative",
		},
		"a cohort name that is no DNS label": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}}, cohort: "Research Team",
			want: "spec.cohort",
		},
		"a score that does not exist": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}},
			dispatch: gantry.DispatchPolicy{Scores: []gantry.DispatchScore{{Name: "Fastest"}}},
			want:     "spec.dispatch.scores[0].name",
		},
		"a negative score weight": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}},
			dispatch: gantry.DispatchPolicy{Scores: []gantry.DispatchScore{{Name: gantry.ScoreSpread, Weight: -1}}},
			want:     "spec.dispatch.scores[0].weight",
		},
		"preferred clusters without the Preference score": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}},
			dispatch: gantry.DispatchPolicy{PreferredClusters: []string{"worker-1"}},
			want:     "preferredClusters needs the Preference score",
		},
		"reclaiming without a cohort": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}},
			preempt:  gantry.PreemptionPolicy{ReclaimWithinCohort: gantry.PreemptLowerPriority},
			want:     "preemption.reclaimWithinCohort and preemption.fairSharing need a cohort",
		},
		"a rule of another field": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}},
			preempt:  gantry.PreemptionPolicy{WithinQueue: gantry.PreemptLowerOrEqualPriority},
			want:     "spec.preemption.withinQueue",
		},
		"a fair-sharing weight above 1000": {
			clusters: []gantry.ClusterQuota{{Name: "worker-1", Quota: gpus("4")}}, cohort: "research", weight: ptr.To[int32](1001),
			want: "spec.fairSharing.weight",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{GenerateName: "invalid-"},
				Spec: gantry.GlobalQueueSpec{Clusters: tc.clusters, AdmissionDeadline: tc.deadline, Cohort: tc.cohort,
					Dispatch: tc.dispatch, FairSharing: gantry.FairSharing{Weight: tc.weight}, Preemption: tc.preempt}}
			err := hubEnv.client.Create(ctx, gq)
			if err == nil {
				_ = hubEnv.client.Delete(ctx, gq)
				t.Fatalf("created; want rejection with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// A GlobalQueue and a Cohort may list as many clusters as their schemas allow: the API server accepts
// them with every CEL rule evaluated over the whole list (each rule's cost grows with it).
func TestQueuesListUpToTheirLimitOfClusters(t *testing.T) {
	ctx := context.Background()
	clusters := manyClusters(256, corev1.ResourceList{gantry.GPUResource: resource.MustParse("1")})
	gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{GenerateName: "wide-"},
		Spec: gantry.GlobalQueueSpec{Clusters: clusters, Cohort: "wide"}}
	if err := hubEnv.client.Create(ctx, gq); err != nil {
		t.Fatalf("a GlobalQueue of 256 clusters: %v", err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, gq) })
	cohort := &gantry.Cohort{ObjectMeta: metav1.ObjectMeta{GenerateName: "wide-"}}
	for _, c := range clusters {
		cohort.Spec.Clusters = append(cohort.Spec.Clusters, gantry.CohortClusterQuota{Name: c.Name, Quota: c.Quota})
	}
	if err := hubEnv.client.Create(ctx, cohort); err != nil {
		t.Fatalf("a Cohort of 256 clusters: %v", err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, cohort) })
}

// manyClusters lists n clusters, each with the quota.
func manyClusters(n int, quota corev1.ResourceList) []gantry.ClusterQuota {
	out := make([]gantry.ClusterQuota, n)
	for i := range out {
		out[i] = gantry.ClusterQuota{Name: fmt.Sprintf("worker-%03d", i), Quota: quota}
	}
	return out
}

// A WorkerCluster names exactly one way to reach its cluster.
func TestWorkerClustersNameOneRegistration(t *testing.T) {
	ctx := context.Background()
	cases := map[string]gantry.WorkerClusterSpec{
		"neither": {},
		"both": {KubeconfigSecretRef: &gantry.SecretReference{Name: "s"},
			ClusterProfileRef: &gantry.ClusterProfileReference{Name: "p"}},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			wc := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{GenerateName: "invalid-"}, Spec: spec}
			err := hubEnv.client.Create(ctx, wc)
			if err == nil {
				_ = hubEnv.client.Delete(ctx, wc)
				t.Fatal("created; want a rejection")
			}
			if want := "set exactly one of kubeconfigSecretRef and clusterProfileRef"; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		})
	}
}

func TestWinnerIsImmutable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "immutable")
	job := gpuJob(ns, "fixed", 1, 1)
	submit(t, job)
	wl := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns},
		Spec: gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 1}}}}
	if err := hubEnv.client.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	wl.Status.DispatchEpoch, wl.Status.ClusterName = 1, "worker-1"
	if err := hubEnv.client.Status().Update(ctx, wl); err != nil {
		t.Fatal(err)
	}
	wl.Status.ClusterName = "worker-2"
	err := hubEnv.client.Status().Update(ctx, wl)
	if err == nil || !strings.Contains(err.Error(), "clusterName is immutable once set") {
		t.Fatalf("changing the winner: got %v", err)
	}

	// Clearing it takes the record of its eviction, for that cluster and epoch.
	wl.Status.ClusterName = ""
	for name, evictions := range map[string][]gantry.Eviction{
		"no record":                   nil,
		"a record of another epoch":   {{Cluster: "worker-1", Epoch: 0, Reason: gantry.ReasonPlacementTimeout, Time: metav1.Now()}},
		"a record of another cluster": {{Cluster: "worker-2", Epoch: 1, Reason: gantry.ReasonPlacementTimeout, Time: metav1.Now()}},
	} {
		wl.Status.Evictions = evictions
		if err := hubEnv.client.Status().Update(ctx, wl); err == nil || !strings.Contains(err.Error(), "clusterName is immutable once set") {
			t.Errorf("clearing the winner with %s: got %v", name, err)
		}
	}
	wl.Status.Evictions = []gantry.Eviction{{Cluster: "worker-1", Epoch: 1, Reason: gantry.ReasonPlacementTimeout, Time: metav1.Now()}}
	if err := hubEnv.client.Status().Update(ctx, wl); err != nil {
		t.Errorf("clearing the winner with the record of its eviction: %v", err)
	}
}

// TestBadPlacementAnnotationsAreRejected: the API server refuses a queued Job whose placement
// annotations are malformed, saying what is wrong; good ones pass.
func TestBadPlacementAnnotationsAreRejected(t *testing.T) {
	ns := newNamespace(t, "annotations")
	cases := map[string]struct {
		annotations map[string]string
		wantErr     string // empty: accepted
	}{
		"products in order":     {map[string]string{gantry.GPUProductsAnnotation: "NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-80GB"}, ""},
		"a topology key":        {map[string]string{gantry.TopologyKeyAnnotation: "topology.kubernetes.io/zone"}, ""},
		"an empty product":      {map[string]string{gantry.GPUProductsAnnotation: "A100,,H100"}, "must list node label values"},
		"a product with spaces": {map[string]string{gantry.GPUProductsAnnotation: "NVIDIA H100"}, "must list node label values"},
		"a product twice":       {map[string]string{gantry.GPUProductsAnnotation: "A100,H100,A100"}, "names a product twice"},
		"nine products":         {map[string]string{gantry.GPUProductsAnnotation: "a,b,c,d,e,f,g,h,i"}, "more than 8 products"},
		"a bad topology key":    {map[string]string{gantry.TopologyKeyAnnotation: "zone/"}, "must be a node label key"},
		"a deadline":            {map[string]string{gantry.AdmissionDeadlineAnnotation: "1h30m"}, ""},
		"a deadline of no time": {map[string]string{gantry.AdmissionDeadlineAnnotation: "0s"}, "must be a positive duration"},
		"a deadline in words":   {map[string]string{gantry.AdmissionDeadlineAnnotation: "tomorrow"}, "must be a positive duration"},
		"a deadline, no unit":   {map[string]string{gantry.AdmissionDeadlineAnnotation: "30"}, "must be a positive duration"},
	}
	i := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			job := gpuJob(ns, fmt.Sprintf("placement-%d", i), 1, 1)
			job.Annotations = tc.annotations
			// The policy may take a moment to reach the API server's admission chain.
			eventually(t, "the placement policy deciding on "+name, func() error {
				err := hubEnv.client.Create(context.Background(), job.DeepCopy(), client.DryRunAll)
				switch {
				case tc.wantErr == "" && err != nil:
					return fmt.Errorf("refused: %v", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					return fmt.Errorf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return nil
			})
		})
	}
}

// A Cohort that is its own parent, lists a cluster twice or holds negative quota is refused.
func TestInvalidCohortsAreRejected(t *testing.T) {
	ctx := context.Background()
	gpus := func(q string) corev1.ResourceList {
		return corev1.ResourceList{gantry.GPUResource: resource.MustParse(q)}
	}
	cases := map[string]struct {
		name string
		spec gantry.CohortSpec
		want string
	}{
		"its own parent":       {name: "selfish", spec: gantry.CohortSpec{Parent: "selfish"}, want: "a cohort cannot be its own parent"},
		"a cluster twice":      {name: "twice", spec: gantry.CohortSpec{Clusters: []gantry.CohortClusterQuota{{Name: "worker-1"}, {Name: "worker-1"}}}, want: "each cluster may be listed only once"},
		"negative quota":       {name: "negative", spec: gantry.CohortSpec{Clusters: []gantry.CohortClusterQuota{{Name: "worker-1", Quota: gpus("-1")}}}, want: "quota must not be negative"},
		"negative lending":     {name: "stingy", spec: gantry.CohortSpec{Clusters: []gantry.CohortClusterQuota{{Name: "worker-1", LendingLimit: gpus("-1")}}}, want: "lendingLimit must not be negative"},
		"a parent no DNS name": {name: "odd", spec: gantry.CohortSpec{Parent: "Big Org"}, want: "spec.parent"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &gantry.Cohort{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: tc.spec}
			err := hubEnv.client.Create(ctx, c)
			if err == nil {
				_ = hubEnv.client.Delete(ctx, c)
				t.Fatalf("created; want rejection with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestAClusterThatNeverAnswersHoldsUpNoOther: while the hub's attempt to connect a cluster whose
// address accepts connections and never answers is still open, another WorkerCluster registered after
// it is looked at and reported all the same.
func TestAClusterThatNeverAnswersHoldsUpNoOther(t *testing.T) {
	startHub(t)
	ctx := context.Background()
	silent, accepted := silentListener(t)
	goodConfig, err := testcluster.Kubeconfig(workers["worker-1"].cfg)
	if err != nil {
		t.Fatal(err)
	}
	registerWithSecret(t, "silent", map[string][]byte{workerconfig.SecretKey: []byte(strings.Replace(string(goodConfig),
		workers["worker-1"].cfg.Host, "https://"+silent, 1))})
	select {
	case <-accepted:
	case <-time.After(waitTimeout):
		t.Fatal("the hub never tried to connect the silent cluster")
	}
	registerWithSecret(t, "prompt-missing", nil)
	connected := func(name string) *metav1.Condition {
		var wc gantry.WorkerCluster
		if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &wc); err != nil {
			t.Fatal(err)
		}
		return apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected)
	}
	eventually(t, "the cluster registered second reported", func() error {
		if c := connected("prompt-missing"); c == nil || c.Reason != gantry.ReasonSecretNotFound {
			return fmt.Errorf("connected condition %+v, want False/%s", c, gantry.ReasonSecretNotFound)
		}
		return nil
	})
	if c := connected("silent"); c != nil {
		t.Errorf("the silent cluster's first attempt ended (%s: %s) before the other was reported: it was held up", c.Reason, c.Message)
	}
}

// registerWithSecret registers a WorkerCluster of that name through a kubeconfig Secret of the same name
// holding data; nil data: no Secret at all. Both go when the test ends.
func registerWithSecret(t *testing.T, name string, data map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	if data != nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: hubNamespace}, Data: data}
		if err := hubEnv.client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, s) })
	}
	wc := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: name}}}
	if err := hubEnv.client.Create(ctx, wc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, wc) })
}

// silentListener listens on a loopback port, accepts connections and never answers them; it says on
// accepted when the first connection came.
func silentListener(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	var once sync.Once
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			once.Do(func() { close(accepted) })
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String(), accepted
}
