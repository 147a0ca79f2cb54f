package dispatcher

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/hubtest"
)

func newPredictor(t *testing.T, leading bool, now time.Time, objs ...client.Object) *Predictor {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := gantry.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	workers := fakeCopies{connected: map[string]bool{"w1": true}}
	return NewPredictor(c, workers, func() bool { return leading }, clocktesting.NewFakePassiveClock(now))
}

// ranFor records a run of the workload on w1 under gq that started ago before now, of 8 GPUs.
func ranFor(w *gantry.Workload, now time.Time, ago time.Duration) *gantry.Workload {
	w.Status.Runs = append(w.Status.Runs, gantry.Run{Cluster: "w1", Epoch: 1, GlobalQueue: "gq", GPUs: 8,
		Started: metav1.NewTime(now.Add(-ago))})
	return w
}

// A job asked of an idle fleet would be dispatched at once; with the quota held by a running job it
// would wait for quota, second of its size in line, and the forecast reads the queue's runs.
func TestPredictSaysWhatAPassWouldDecide(t *testing.T) {
	now := at.Add(time.Hour)
	ask := hubWorkload("ns", "ask", "q").Obj()

	a, err := newPredictor(t, true, now, hubObjects()...).Predict(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if a.Nomination == nil || len(a.Nomination.Clusters) != 1 || a.Nomination.Clusters[0] != "w1" || a.Forecast.Known {
		t.Fatalf("on an idle fleet: nomination %+v, verdict %+v, forecast %+v; want w1 at once", a.Nomination, a.Verdict, a.Forecast)
	}

	running := ranFor(makeHubWorkload("running", "q").Nominated("gq", 1, "w1").AdmittedOn("w1").Obj(), now, 30*time.Minute)
	done := ranFor(makeHubWorkload("done", "q").Finished("Succeeded").Obj(), now, 2*time.Hour)
	waiting := makeHubWorkload("waiting", "q").Created(at.Add(-time.Minute)).Obj()
	a, err = newPredictor(t, true, now, append(hubObjects(), running, done, waiting)...).Predict(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict == nil || a.Verdict.Reason != gantry.ReasonWaitingForQuota || a.Workload.GlobalQueue != "gq" {
		t.Fatalf("verdict %+v under %q; want waiting for quota under gq", a.Verdict, a.Workload.GlobalQueue)
	}
	if a.Position != 2 || a.Pending != 2 || a.AheadOfShape != 2 {
		t.Errorf("position %d of %d, %d of its size ahead; want behind the waiting job", a.Position, a.Pending, a.AheadOfShape)
	}
	if !a.Forecast.Known || a.Forecast.Ahead != 2 || a.StartedRecently["w1"] != 2 {
		t.Errorf("forecast %+v, started recently %v; want one from the 2 runs of 8 GPUs", a.Forecast, a.StartedRecently)
	}
	if a.Clusters[0].Used[gantry.GPUResource] != 8000 {
		t.Errorf("w1 as judged: %+v; want the running job's 8 GPUs used", a.Clusters[0])
	}
}

// A standby has no connections of its own: it goes by the Connected condition the leader wrote.
func TestPredictOnAStandbyReadsTheClustersStatus(t *testing.T) {
	ask := hubWorkload("ns", "ask", "q").Obj()
	a, err := newPredictor(t, false, at.Time, hubObjects()...).Predict(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict == nil || a.Verdict.Reason != gantry.ReasonNoClusterAvailable {
		t.Errorf("verdict %+v; want no cluster available (w1 does not say it is connected)", a.Verdict)
	}
	objs := append(hubObjects()[:2], hubtest.MakeWorkerCluster("w1").AgentReady().Connected().Obj())
	objs = append(objs, hubObjects()[3:]...)
	a, err = newPredictor(t, false, at.Time, objs...).Predict(context.Background(), ask)
	if err != nil {
		t.Fatal(err)
	}
	if a.Nomination == nil {
		t.Errorf("verdict %+v; want w1 nominated, as its status says it is connected", a.Verdict)
	}
}

// A job whose Workload exists is not predicted: its own status says what became of it.
func TestPredictRefusesAJobSubmittedAlready(t *testing.T) {
	p := newPredictor(t, true, at.Time, append(hubObjects(), makeHubWorkload("ask", "q").Obj())...)
	if _, err := p.Predict(context.Background(), hubWorkload("ns", "ask", "q").Obj()); !errors.Is(err, ErrSubmitted) {
		t.Errorf("err %v; want ErrSubmitted", err)
	}
}
