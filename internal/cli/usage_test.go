package cli

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

const a100 = "NVIDIA-A100-SXM4-80GB"

// day is a time on a day before the fleet's start, in UTC.
func day(date string, hour int) metav1.Time {
	d, err := time.Parse(time.DateOnly, date)
	if err != nil {
		panic(err)
	}
	return metav1.NewTime(d.Add(time.Duration(hour) * time.Hour))
}

// usedFleet is the fleet with worker-1's A100s priced at 2.5 an hour, team-a's and team-b's Usages,
// and runs: job-a runs on worker-1 since the start (8 GPUs, counted by no Usage yet), job-b's run on
// worker-2 was taken back on 2026-04-30 (counted by team-a's Usage, in flight), and job-old's second run
// on worker-2 was taken back an hour ago (not counted yet). team-c has a Workload that never ran.
func usedFleet() []client.Object {
	objs := fleet()
	for _, o := range objs {
		switch o := o.(type) {
		case *gantry.WorkerCluster:
			if o.Name == "worker-1" {
				o.Spec.Price = &gantry.ClusterPrice{GPU: []gantry.GPUPrice{{Product: a100, PerHour: "2.5"}}}
			}
		case *gantry.Workload:
			switch o.Name {
			case "job-a":
				o.Status.Runs = []gantry.Run{{Cluster: "worker-1", Epoch: 1, GlobalQueue: "gpus", GPUs: 8, Started: at(1)}}
			case "job-b":
				o.UID = "uid-job-b"
				o.Status.Runs = []gantry.Run{{Cluster: "worker-2", Epoch: 1, GlobalQueue: "gpus", GPUs: 2, Started: day("2026-04-30", 10),
					Ended: ptrTo(day("2026-04-30", 11)), Outcome: "Preempted", TakenBack: true}}
			}
		}
	}
	old := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-old", Namespace: "team-a", UID: "uid-job-old"},
		Spec: gantry.WorkloadSpec{QueueName: "qa"},
		Status: gantry.WorkloadStatus{AccountedEpoch: 1, Runs: []gantry.Run{
			{Cluster: "worker-1", Epoch: 1, GlobalQueue: "gpus", GPUs: 8, GPUProduct: a100, Started: day("2026-04-20", 0),
				Ended: ptrTo(day("2026-04-20", 1)), Outcome: "Succeeded"},
			{Cluster: "worker-2", Epoch: 2, GlobalQueue: "gpus", GPUs: 4, GPUProduct: "NVIDIA-H100-80GB", Borrowed: true,
				Started: at(-60), Ended: ptrTo(at(-30)), Outcome: "Stopped", TakenBack: true}}}}
	never := &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-new", Namespace: "team-c"}, Spec: gantry.WorkloadSpec{QueueName: "qc"}}
	w1 := func(q, gq string, seconds, borrowed int64, cost gantry.Amount) gantry.UsageEntry {
		return gantry.UsageEntry{Queue: q, GlobalQueue: gq, Cluster: "worker-1", GPUProduct: a100, GPUSeconds: seconds,
			BorrowedGPUSeconds: borrowed, Cost: cost}
	}
	lostOnWorker2 := gantry.UsageEntry{Queue: "qa", GlobalQueue: "gpus", Cluster: "worker-2", GPUSeconds: 7200, LostGPUSeconds: 7200}
	teamA := &gantry.Usage{ObjectMeta: metav1.ObjectMeta{Name: gantry.UsageName, Namespace: "team-a"}, Status: gantry.UsageStatus{
		// The totals count 24 hours of one A100 more than the days kept.
		Totals: []gantry.UsageEntry{w1("qa", "gpus", 129600, 3600, "90"), lostOnWorker2, w1("qa", "vision", 1800, 0, "1.25")},
		Days: []gantry.DayUsage{
			{Day: "2026-04-20", Entries: []gantry.UsageEntry{w1("qa", "gpus", 28800, 0, "20")}},
			{Day: "2026-04-30", Entries: []gantry.UsageEntry{w1("qa", "gpus", 14400, 3600, "10"), lostOnWorker2}},
			{Day: "2026-05-01", Entries: []gantry.UsageEntry{w1("qa", "vision", 1800, 0, "1.25")}},
		},
		InFlight: []gantry.AccountedRuns{{WorkloadUID: "uid-job-b", Epoch: 1}}}}
	teamB := &gantry.Usage{ObjectMeta: metav1.ObjectMeta{Name: gantry.UsageName, Namespace: "team-b"}, Status: gantry.UsageStatus{
		Totals: []gantry.UsageEntry{w1("qb", "vision", 10800, 10800, "7.5")},
		Days:   []gantry.DayUsage{{Day: "2026-04-10", Entries: []gantry.UsageEntry{w1("qb", "vision", 10800, 10800, "7.5")}}}}}
	return append(objs, old, never, teamA, teamB)
}

func ptrTo(t metav1.Time) *metav1.Time { return &t }

// usedHub is the used fleet on a hub that refuses to list the kinds of forbidden, as it refuses a tenant.
func usedHub(forbidden ...client.ObjectList) client.WithWatch {
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(usedFleet()...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			for _, f := range forbidden {
				if reflect.TypeOf(f) == reflect.TypeOf(list) {
					return apierrors.NewForbidden(schema.GroupResource{Group: "gantry.dev", Resource: "something"}, "", errors.New("RBAC"))
				}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
}

// usage's output in each format is its golden file's (go test ./internal/cli -update rewrites them).
func TestUsageGoldens(t *testing.T) {
	for _, tc := range []struct {
		name      string
		forbidden client.ObjectList
		args      []string
	}{
		{"usage", nil, []string{"usage", "-n", "team-a"}},
		{"usage-since", nil, []string{"usage", "--since", "7d", "-n", "team-a"}},
		{"usage-today-csv", nil, []string{"usage", "-n", "team-a", "--since", "0d", "-o", "csv"}},
		{"usage-csv", nil, []string{"usage", "-n", "team-a", "-o", "csv"}},
		{"usage-json", nil, []string{"usage", "-n", "team-a", "--since", "7d", "-o", "json"}},
		{"usage-all", nil, []string{"usage", "-A"}},
		{"usage-all-by", nil, []string{"usage", "-A", "--by", "namespace,cluster"}},
		{"usage-all-yaml", nil, []string{"usage", "-A", "--by", "product,namespace", "-o", "yaml"}},
		{"usage-none", nil, []string{"usage", "-n", "team-c"}},
		{"usage-tenant", &gantry.WorkerClusterList{}, []string{"usage", "-n", "team-a"}},
		{"usage-tenant-json", &gantry.WorkerClusterList{}, []string{"usage", "-n", "team-a", "-o", "json"}},
	} {
		var forbidden []client.ObjectList
		if tc.forbidden != nil {
			forbidden = append(forbidden, tc.forbidden)
		}
		out, err := runOn(usedHub(forbidden...), tc.args...)
		if err != nil {
			t.Fatalf("kubectl gantry %s: %v", strings.Join(tc.args, " "), err)
		}
		golden(t, tc.name, out, tc.args)
	}
}

// A namespace with neither a Usage nor runs has no rows, in any format; -A leaves it out.
func TestUsageOfANamespaceThatUsedNothing(t *testing.T) {
	for format, want := range map[string]string{
		"table": "No usage recorded.\n",
		"csv":   "namespace,queue,globalQueue,cluster,gpuProduct,gpuSeconds,borrowedGPUSeconds,lostGPUSeconds,gpuHours,cost,lostCost\n",
	} {
		if out := runUsage(t, "-n", "team-z", "-o", format); out != want {
			t.Errorf("usage -n team-z -o %s: %q, want %q", format, out, want)
		}
	}
	if out := runUsage(t, "-n", "team-z", "-o", "json"); !strings.Contains(out, `"rows": []`) {
		t.Errorf("usage -n team-z -o json has no empty rows:\n%s", out)
	}
	if out := runUsage(t, "-A", "--by", "namespace"); strings.Contains(out, "team-c") || !strings.Contains(out, "team-b") {
		t.Errorf("usage -A shows team-c, which used nothing, or not team-b:\n%s", out)
	}
}

// Who may not list Workloads gets what the Usage counts, and is told the rest is left out.
func TestUsageWithoutTheRightToListWorkloads(t *testing.T) {
	out, err := runOn(usedHub(&gantry.WorkloadList{}), "usage", "-n", "team-a", "--by", "namespace", "-o", "csv")
	want := "Runs the Usage does not count yet are left out: you may not list Workloads in namespace team-a on the hub.\n" +
		"namespace,gpuSeconds,borrowedGPUSeconds,lostGPUSeconds,gpuHours,cost,lostCost\n" +
		"team-a,138600,3600,7200,38.5,91.25,0\n"
	if err != nil || out != want {
		t.Errorf("usage without Workloads: %v\n%s\nwant\n%s", err, out, want)
	}
	out, err = runOn(usedHub(&gantry.WorkloadList{}), "usage", "-n", "team-a", "-o", "json")
	if err != nil || !strings.Contains(out, `"unreadable": [
        "Workloads"
    ]`) {
		t.Errorf("usage -o json without Workloads: %v\n%s", err, out)
	}
}

// A --since further back than a Usage keeps days counts what it keeps, and says so.
func TestUsageSinceBeyondWhatIsKept(t *testing.T) {
	out := runUsage(t, "-n", "team-a", "--since", "100d", "--by", "namespace")
	if !strings.Contains(out, "A Usage keeps its last 90 days: what ran before 2026-02-01 is not counted.") {
		t.Errorf("usage --since 100d does not say what is not counted:\n%s", out)
	}
	if out89 := runUsage(t, "-n", "team-a", "--since", "89d", "--by", "namespace"); strings.Contains(out89, "keeps its last") {
		t.Errorf("usage --since 89d warns:\n%s", out89)
	}
}

func runUsage(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runOn(usedHub(), append([]string{"usage"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl gantry usage %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// usage completes its -o formats and --by's dimensions, one after another.
func TestUsageCompletesItsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "-o", ""}, "table\ncsv\njson\nyaml\n:4\n"},
		{[]string{"usage", "--by", ""}, "namespace\nqueue\nglobalqueue\ncluster\nproduct\n:6\n"},
		{[]string{"usage", "--by", "cluster,queue,"}, "cluster,queue,namespace\ncluster,queue,globalqueue\ncluster,queue,product\n:6\n"},
	} {
		out := run(t, append([]string{"__complete"}, tc.args...)...)
		if !strings.HasPrefix(out, tc.want) {
			t.Errorf("completing %q: %q, want %q", tc.args, out, tc.want)
		}
	}
}
