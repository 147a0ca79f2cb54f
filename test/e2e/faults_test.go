package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// nothingLeftAfterDeletion deletes every hub Job of the namespace and waits until no copy, Job or pod of
// Gantry's is left in it on any worker, and no Workload on the hub.
func nothingLeftAfterDeletion(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := tb.Hub.Client.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns),
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	owned := client.HasLabels{gantry.WorkloadUIDLabel}
	eventually(t, "nothing of Gantry's left in "+ns, 3*time.Minute, time.Second, func() error {
		var left []string
		var wls gantry.WorkloadList
		if err := tb.Hub.Client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, wl := range wls.Items {
			left = append(left, "hub workload "+wl.Name)
		}
		for _, w := range tb.Workers {
			var copies gantry.WorkloadList
			var jobs batchv1.JobList
			var pods corev1.PodList
			for _, l := range []client.ObjectList{&copies, &jobs, &pods} {
				if err := w.Client.List(ctx, l, client.InNamespace(ns), owned); err != nil {
					return err
				}
			}
			for _, c := range copies.Items {
				left = append(left, w.Name+" copy "+c.Name)
			}
			for _, j := range jobs.Items {
				left = append(left, w.Name+" job "+j.Name)
			}
			for _, p := range pods.Items {
				left = append(left, w.Name+" pod "+p.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}
