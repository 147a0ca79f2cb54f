package visibility

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher"
	"github.com/gantry-dev/gantry/jobkind"
)

// answerOf is the WhatIf answer of a prediction for the job, whose Workload would be wl.
func answerOf(job client.Object, kind jobkind.Kind, wl *gantry.Workload, a *dispatcher.Answer) *visibility.WhatIf {
	w := a.Workload
	out := &visibility.WhatIf{
		TypeMeta:   metav1.TypeMeta{APIVersion: visibility.Group + "/" + visibility.Version, Kind: visibility.WhatIfKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: job.GetNamespace(), Name: job.GetName(), GenerateName: job.GetGenerateName()},
		JobKind:    string(kind.Name()), Workload: wl.Name, Queue: wl.Spec.QueueName, GlobalQueue: w.GlobalQueue,
		Priority: w.Priority, Requests: w.Requests.ToResourceList(), Now: metav1.NewTime(a.Now),
	}
	if w.GlobalQueue != "" {
		out.PositionInGlobalQueue, out.PendingInGlobalQueue = a.Position, a.Pending
	}
	switch {
	case a.Nomination != nil:
		out.Decision, out.Nominated = visibility.DecisionDispatch, a.Nomination.Clusters
	case len(a.Preemptions) > 0:
		out.Decision = visibility.DecisionPreempt
		for _, p := range a.Preemptions {
			ns, name, _ := strings.Cut(p.Victim, "/")
			out.Preemptions = append(out.Preemptions, visibility.WhatIfPreemption{Namespace: ns, Name: name, Cluster: p.Cluster})
		}
	default:
		out.Decision = visibility.DecisionWait
		if a.Verdict != nil {
			out.Reason, out.Message = a.Verdict.Reason, a.Verdict.Message
		}
		if w.GlobalQueue != "" {
			out.Forecast = forecastOf(a.Forecast)
		}
	}
	for _, c := range a.Clusters {
		out.Clusters = append(out.Clusters, clusterAnswer(c, a.StartedRecently[c.Name]))
	}
	return out
}

func clusterAnswer(c dispatch.ClusterPrediction, started int) visibility.WhatIfCluster {
	out := visibility.WhatIfCluster{Name: c.Name, Candidate: c.LeftOut == "", Reason: c.LeftOut, WithinQuota: c.WithinQuota,
		Quota: c.Quota.ToResourceList(), Used: c.Used.ToResourceList(), Reserved: c.Reserved.ToResourceList(), Ceiling: c.Ceiling.ToResourceList(),
		PerHour: decimal(c.PerHour), DataTermsMatched: c.DataTermsMatched, StartedRecently: started}
	for _, g := range c.GPUs {
		out.GPUs = append(out.GPUs, visibility.WhatIfGPUs{Product: g.Product, Allocatable: g.Allocatable, Free: g.Free, LargestFreeOnNode: g.LargestFreeOnNode})
	}
	for _, name := range slices.Sorted(maps.Keys(c.Scores)) {
		out.Scores = append(out.Scores, visibility.WhatIfScore{Name: name, Value: decimal(c.Scores[name])})
	}
	return out
}

func forecastOf(f dispatch.Forecast) *visibility.StartForecast {
	out := &visibility.StartForecast{Known: f.Known, Coverage: int32(math.Round(dispatch.ForecastCoverage * 100)), Ahead: f.Ahead,
		Window: metav1.Duration{Duration: dispatch.ForecastWindow}}
	if f.Known {
		out.Early, out.Likely, out.Late = &metav1.Duration{Duration: f.Early}, &metav1.Duration{Duration: f.Likely}, &metav1.Duration{Duration: f.Late}
		out.StartsPerHour = decimal(f.Rate)
	}
	return out
}

// decimal writes a value to six decimals at most, as prices are written; NaN (not known) is empty.
func decimal(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}
