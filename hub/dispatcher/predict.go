package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/hub/dispatcher/queues"
)

// ErrSubmitted is the answer of a prediction for a job whose Workload exists already: what the
// dispatcher does with it is in its status (kubectl gantry explain).
var ErrSubmitted = errors.New("a Workload of that name exists already")

// Predictor says what the dispatcher would do with a job submitted now (dispatch.WhatIf), over the
// hub's cache as a pass reads it. It serves on every replica: the leader knows its own connections to
// the workers; a standby goes by what the leader last wrote of them in the WorkerClusters' status.
type Predictor struct {
	Client client.Reader
	// Workers are the hub's connections, which Leading says this replica holds.
	Workers Workers
	Leading func() bool
	Clock   clock.PassiveClock
	// RejectionTTL as the Dispatcher's.
	RejectionTTL time.Duration
	// one lets one prediction run at a time: each builds a snapshot of every workload.
	one chan struct{}
}

// NewPredictor returns a Predictor reading c.
func NewPredictor(c client.Reader, workers Workers, leading func() bool, clk clock.PassiveClock) *Predictor {
	return &Predictor{Client: c, Workers: workers, Leading: leading, Clock: clk, one: make(chan struct{}, 1)}
}

// Answer is a prediction and what was learnt with it.
type Answer struct {
	dispatch.Prediction
	// Workload is the asked one as the pass would hold it: its GlobalQueue resolved, or why it has none.
	Workload *dispatch.Workload
	// Forecast is when it would start, for one that would neither be dispatched nor preempt at once.
	Forecast dispatch.Forecast
	// StartedRecently counts per cluster the jobs of its shape its GlobalQueue started in the
	// forecast's window.
	StartedRecently map[string]int
	Now             time.Time
}

// Predict says what a pass would decide for wl, a Workload not yet created, were it created now.
func (p *Predictor) Predict(ctx context.Context, wl *gantry.Workload) (*Answer, error) {
	select {
	case p.one <- struct{}{}:
		defer func() { <-p.one }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var wls gantry.WorkloadList
	if err := p.Client.List(ctx, &wls, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing workloads: %w", err)
	}
	key := keyOf(wl)
	items := make([]*gantry.Workload, 0, len(wls.Items)+1)
	for i := range wls.Items {
		if keyOf(&wls.Items[i]) == key {
			return nil, ErrSubmitted
		}
		items = append(items, &wls.Items[i])
	}
	now := p.Clock.Now()
	r, err := p.read(ctx, now)
	if err != nil {
		return nil, err
	}
	// Created now, to the second as the API server records it: ties in the queue go by name.
	asked := wl.DeepCopy()
	asked.CreationTimestamp.Time, asked.UID = now.Truncate(time.Second), "whatif"
	m := queues.NewManager(0)
	m.Replace(append(items, asked))
	m.Sync()
	s := m.Full(r).Snapshot()
	i := slices.IndexFunc(s.Workloads, func(w *dispatch.Workload) bool { return w.Key == key })
	if i < 0 {
		return nil, fmt.Errorf("the snapshot holds no workload %s", key)
	}
	w := s.Workloads[i]
	s.Workloads = slices.Delete(slices.Clone(s.Workloads), i, i+1)
	a := &Answer{Prediction: dispatch.WhatIf(s, w), Workload: w, Now: now}
	starts := startsOf(wls.Items, w.GlobalQueue)
	a.StartedRecently = dispatch.StartedRecently(starts, w.GPU.Total, now)
	if a.Nomination == nil && len(a.Preemptions) == 0 && w.GlobalQueue != "" {
		a.Forecast = dispatch.ForecastStart(starts, w.GPU.Total, a.AheadOfShape, now)
	}
	return a, nil
}

// read reads what a pass reads of the hub besides the Workloads, with the clusters as this replica
// knows them.
func (p *Predictor) read(ctx context.Context, now time.Time) (queues.Read, error) {
	var r queues.Read
	wcs, err := readSpecs(ctx, p.Client, &r)
	if err != nil {
		return r, err
	}
	r.Now, r.RejectionTTL = now, p.RejectionTTL
	if p.Leading() {
		r.Clusters = snapshotClusters(wcs, p.Workers)
		r.Copies = func(wl *gantry.Workload) []dispatch.Copy { return observeCopies(wl, p.Workers) }
		return r, nil
	}
	r.Clusters = make(map[string]dispatch.Cluster, len(wcs))
	for i := range wcs {
		c := clusterOf(&wcs[i])
		c.Connected = apimeta.IsStatusConditionTrue(wcs[i].Status.Conditions, gantry.ClusterConnected)
		r.Clusters[c.Name] = c
	}
	return r, nil
}

// startsOf are the runs the Workloads record under the GlobalQueue: the jobs it started, where, when,
// and when they ended.
func startsOf(wls []gantry.Workload, globalQueue string) []dispatch.Start {
	var out []dispatch.Start
	for i := range wls {
		for _, run := range wls[i].Status.Runs {
			if run.GlobalQueue == globalQueue {
				s := dispatch.Start{At: run.Started.Time, Cluster: run.Cluster, GPUs: run.GPUs}
				if run.Ended != nil {
					s.Ended = run.Ended.Time
				}
				out = append(out, s)
			}
		}
	}
	return out
}
