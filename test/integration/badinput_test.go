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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
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
	// blank is a GlobalQueue of a generated name and nothing else; onWorker1 one with 4 GPUs on worker-1,
	// valid as it is.
	blank := func() *hubtest.GlobalQueueWrapper { return hubtest.MakeGlobalQueue("").GenerateName("invalid-") }
	onWorker1 := func() *hubtest.GlobalQueueWrapper { return blank().Cluster("worker-1", gantry.GPUResource, "4") }
	cases := map[string]struct {
		queue *hubtest.GlobalQueueWrapper
		want  string
	}{
		"negative quota": {
			queue: blank().Cluster("worker-1", gantry.GPUResource, "-4"),
			want:  "quota must not be negative",
		},
		"cluster listed twice": {
			queue: onWorker1().Cluster("worker-1", gantry.GPUResource, "8"),
			want:  "each cluster may be listed only once",
		},
		"no clusters": {
			queue: blank(),
			want:  "spec.clusters",
		},
		"more clusters than a queue may list": {
			queue: withClusters(blank(), 257),
			want:  "must have at most 256 items",
		},
		"an admission deadline of no time": {
			queue: onWorker1().AdmissionDeadline(0),
			want:  "admissionDeadline must be positive",
		},
		"limits without a cohort": {
			queue: onWorker1().LendingLimit(gantry.GPUResource, "2"),
			want:  "borrowingLimit and lendingLimit need a cohort",
		},
		"lending what the quota does not limit": {
			queue: onWorker1().LendingLimit("memory", "1Gi").Cohort("research"),
			want:  "lendingLimit may name only resources of quota",
		},
		"borrowing what the quota does not limit": {
			queue: onWorker1().BorrowingLimit("cpu", "8").Cohort("research"),
			want:  "borrowingLimit may name only resources of quota",
		},
		"a negative borrowing limit": {
			queue: onWorker1().BorrowingLimit(gantry.GPUResource, "-1").Cohort("research"),
			want:  "borrowingLimit must not be negative",
		},
		"a cohort name that is no DNS label": {
			queue: onWorker1().Cohort("Research Team"),
			want:  "spec.cohort",
		},
		"a score that does not exist": {
			queue: onWorker1().Score("Fastest", 0),
			want:  "spec.dispatch.scores[0].name",
		},
		"a negative score weight": {
			queue: onWorker1().Score(gantry.ScoreSpread, -1),
			want:  "spec.dispatch.scores[0].weight",
		},
		"preferred clusters without the Preference score": {
			queue: onWorker1().PreferredClusters("worker-1"),
			want:  "preferredClusters needs the Preference score",
		},
		"reclaiming without a cohort": {
			queue: onWorker1().ReclaimWithinCohort(gantry.PreemptLowerPriority),
			want:  "preemption.reclaimWithinCohort and preemption.fairSharing need a cohort",
		},
		"a rule of another field": {
			queue: onWorker1().PreemptWithinQueue(gantry.PreemptLowerOrEqualPriority),
			want:  "spec.preemption.withinQueue",
		},
		"a fair-sharing weight above 1000": {
			queue: onWorker1().Cohort("research").Weight(1001),
			want:  "spec.fairSharing.weight",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gq := tc.queue.Obj()
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
	gq := withClusters(hubtest.MakeGlobalQueue("").GenerateName("wide-").Cohort("wide"), 256).Obj()
	wide := hubtest.MakeCohort("").GenerateName("wide-")
	for _, c := range gq.Spec.Clusters {
		wide.Cluster(c.Name, gantry.GPUResource, "1")
	}
	cohort := wide.Obj()
	if err := hubEnv.client.Create(ctx, gq); err != nil {
		t.Fatalf("a GlobalQueue of 256 clusters: %v", err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, gq) })
	if err := hubEnv.client.Create(ctx, cohort); err != nil {
		t.Fatalf("a Cohort of 256 clusters: %v", err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, cohort) })
}

// withClusters adds n clusters to the queue, worker-000 on, each with quota of 1 GPU.
func withClusters(queue *hubtest.GlobalQueueWrapper, n int) *hubtest.GlobalQueueWrapper {
	for i := range n {
		queue.Cluster(fmt.Sprintf("worker-%03d", i), gantry.GPUResource, "1")
	}
	return queue
}

// A WorkerCluster names exactly one way to reach its cluster.
// A WorkerCluster names one way to reach it, and its prices are not negative, each product priced once.
func TestWorkerClustersNameOneRegistration(t *testing.T) {
	ctx := context.Background()
	cluster := func() *hubtest.WorkerClusterWrapper { return hubtest.MakeWorkerCluster("").GenerateName("invalid-") }
	cases := map[string]struct {
		cluster *hubtest.WorkerClusterWrapper
		want    string
	}{
		"neither":              {cluster(), "set exactly one of kubeconfigSecretRef and clusterProfileRef"},
		"both":                 {cluster().KubeconfigSecret("s").ClusterProfile("p"), "set exactly one of kubeconfigSecretRef and clusterProfileRef"},
		"a negative GPU price": {cluster().KubeconfigSecret("s").GPUPrice("A100", "-1.5"), "spec.price.gpu[0].perHour in body should match"},
		"a negative CPU price": {cluster().KubeconfigSecret("s").CPUPrice("-0.01"), "spec.price.cpu in body should match"},
		"a price in words":     {cluster().KubeconfigSecret("s").GPUPrice("", "cheap"), "spec.price.gpu[0].perHour in body should match"},
		"a product twice":      {cluster().KubeconfigSecret("s").GPUPrice("A100", "2").GPUPrice("A100", "3"), "each GPU product may be priced only once"},
		"two without product":  {cluster().KubeconfigSecret("s").GPUPrice("", "2").GPUPrice("", "3"), "each GPU product may be priced only once"},
		"prices":               {cluster().KubeconfigSecret("s").GPUPrice("A100", "2.10").GPUPrice("", "1.5").CPUPrice("0.031"), ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wc := tc.cluster.Obj()
			err := hubEnv.client.Create(ctx, wc, client.DryRunAll)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatal("created; want a rejection")
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestWinnerIsImmutable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "immutable")
	job := gpuJob(ns, "fixed", 1, 1)
	submit(t, job)
	wl := hubtest.MakeWorkload("fixed", ns).Queue("q").PodSet("main", 1).Obj()
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
// annotations (or stop annotation) are malformed, saying what is wrong; good ones pass.
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
		"stopped":               {map[string]string{gantry.StoppedAnnotation: "true"}, ""},
		"not stopped":           {map[string]string{gantry.StoppedAnnotation: "false"}, ""},
		"stopped, in words":     {map[string]string{gantry.StoppedAnnotation: "yes"}, "must be true (kubectl gantry stop) or false"},
		"checkpoints every 30m": {map[string]string{gantry.CheckpointIntervalAnnotation: "30m"}, ""},
		"checkpoints in words":  {map[string]string{gantry.CheckpointIntervalAnnotation: "often"}, "must be a positive duration"},
		"data in a region":      {map[string]string{gantry.DataLocationAnnotation: "topology.kubernetes.io/region=eu-west, example.com/dataset=imagenet"}, ""},
		"data, a bare key":      {map[string]string{gantry.DataLocationAnnotation: "region"}, "must be labels of WorkerClusters as key=value"},
		"data, a bad value":     {map[string]string{gantry.DataLocationAnnotation: "region=eu west/1"}, "must be labels of WorkerClusters as key=value"},
		"data, a key twice":     {map[string]string{gantry.DataLocationAnnotation: "region=eu,region=us"}, "names a label key twice"},
		"data, nine terms":      {map[string]string{gantry.DataLocationAnnotation: "a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1"}, "more than 8 terms"},
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
	cases := map[string]struct {
		cohort *hubtest.CohortWrapper
		want   string
	}{
		"its own parent":       {hubtest.MakeCohort("selfish").Parent("selfish"), "a cohort cannot be its own parent"},
		"a cluster twice":      {hubtest.MakeCohort("twice").Cluster("worker-1").Cluster("worker-1"), "each cluster may be listed only once"},
		"negative quota":       {hubtest.MakeCohort("negative").Cluster("worker-1", gantry.GPUResource, "-1"), "quota must not be negative"},
		"negative lending":     {hubtest.MakeCohort("stingy").Cluster("worker-1").LendingLimit(gantry.GPUResource, "-1"), "lendingLimit must not be negative"},
		"a parent no DNS name": {hubtest.MakeCohort("odd").Parent("Big Org"), "spec.parent"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := tc.cohort.Obj()
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
	wc := hubtest.MakeWorkerCluster(name).KubeconfigSecret(name).Obj()
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
