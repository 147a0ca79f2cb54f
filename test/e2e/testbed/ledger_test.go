package testbed

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestCheckOneRun(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(cluster, epoch, name string, s int, node string, phase corev1.PodPhase, deleted bool) PodRecord {
		return PodRecord{Cluster: cluster, Epoch: epoch, Name: name, WorkloadUID: "w", NodeName: node, Phase: phase,
			Deleted: deleted, Seen: t0.Add(time.Duration(s) * time.Second)}
	}
	cases := map[string]struct {
		pods []PodRecord
		want string
	}{
		"one run": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "", corev1.PodPending, false),
			pod("w1", "1", "a", 1, "n1", corev1.PodRunning, false),
			pod("w1", "1", "a", 2, "n1", corev1.PodSucceeded, false),
		}},
		"evicted, then run elsewhere": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w1", "1", "a", 1, "n1", corev1.PodRunning, true),
			pod("w2", "2", "b", 2, "n2", corev1.PodRunning, false),
		}},
		"two places at once": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w2", "2", "b", 1, "n2", corev1.PodRunning, false),
			pod("w1", "1", "a", 2, "n1", corev1.PodRunning, true),
		}, want: "live on w2 in epoch 2 while 1 pod(s) live on w1"},
		"unbound pods of another epoch do not run": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodRunning, false),
			pod("w2", "2", "b", 1, "", corev1.PodPending, false),
		}},
		"completed twice": {pods: []PodRecord{
			pod("w1", "1", "a", 0, "n1", corev1.PodSucceeded, false),
			pod("w2", "2", "b", 1, "n2", corev1.PodSucceeded, false),
		}, want: "ran to completion in 2 places"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckOneRun(tc.pods)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected breach: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
