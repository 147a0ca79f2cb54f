package workersync

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/dispatch"
)

// openRun records that the job started to run on the cluster in the current epoch: its Job was created
// there now. A run of that epoch already recorded stays as it is.
func (d *decider) openRun(cluster string) {
	st := d.status
	if n := len(st.Runs); n > 0 && st.Runs[n-1].Epoch == st.DispatchEpoch && st.Runs[n-1].Cluster == cluster {
		return
	}
	run := gantry.Run{Cluster: cluster, Epoch: st.DispatchEpoch, GlobalQueue: st.GlobalQueue,
		GPUs: dispatch.GPUDemandOf(&d.wl.Spec).Total, GPUProduct: admittedProduct(d.wl), Started: metav1.NewTime(d.v.Now)}
	if st.Admission != nil {
		run.Borrowed = st.Admission.Borrowed
	}
	st.Runs = append(st.Runs, run)
	if n := len(st.Runs); n > gantry.MaxRuns {
		st.Runs = st.Runs[n-gantry.MaxRuns:]
	}
}

// closeRun records the end of the run of the current epoch, if one runs: why it ended, and whether it
// was taken back before its job ended there.
func (d *decider) closeRun(outcome string, takenBack bool) {
	st := d.status
	n := len(st.Runs)
	if n == 0 || st.Runs[n-1].Ended != nil || st.Runs[n-1].Epoch != st.DispatchEpoch {
		return
	}
	r := &st.Runs[n-1]
	r.Ended, r.Outcome, r.TakenBack = &metav1.Time{Time: d.v.Now}, outcome, takenBack
}

// admittedProduct is the GPU product the winner's agent chose for the pod set that asks the most GPUs of
// one pod; empty when it chose none (the job named no products).
func admittedProduct(wl *gantry.Workload) string {
	if wl.Status.Admission == nil {
		return ""
	}
	var best string
	var perPod int64
	for _, ps := range wl.Spec.PodSets {
		q, ok := ps.Requests[gantry.GPUResource]
		if !ok || q.Value() <= perPod {
			continue
		}
		for _, a := range wl.Status.Admission.PodSets {
			if a.Name == ps.Name {
				best, perPod = a.GPUProduct, q.Value()
			}
		}
	}
	return best
}

// noteCheckpoint records on the open run the last checkpoint the job says it wrote there (its annotation
// gantry.dev/last-checkpoint), when it is later than the one recorded, within the run and not in the
// future. A value that is no time saves nothing: a Warning Event on the hub job says so.
func (d *decider) noteCheckpoint(job client.Object, cluster string) {
	v, ok := job.GetAnnotations()[gantry.LastCheckpointAnnotation]
	st := d.status
	n := len(st.Runs)
	if !ok || n == 0 || st.Runs[n-1].Ended != nil || st.Runs[n-1].Epoch != st.DispatchEpoch {
		return
	}
	at, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
	if err != nil {
		d.event(corev1.EventTypeWarning, EventBadCheckpoint, "Annotation %s on the job on %s is %q, not a time such as %s: the work it saved is not known, and counts as lost if it is preempted",
			gantry.LastCheckpointAnnotation, cluster, v, d.v.Now.UTC().Format(time.RFC3339))
		return
	}
	r := &st.Runs[n-1]
	if at.Before(r.Started.Time) || at.After(d.v.Now) || (r.Checkpointed != nil && !at.After(r.Checkpointed.Time)) {
		return
	}
	r.Checkpointed = &metav1.Time{Time: at}
}
