package jobkind

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The placement a pod template states becomes a per-node limit of its pod set, or, where Gantry cannot
// judge it for a gang, an error that says so.
func TestMaxPerNode(t *testing.T) {
	own := map[string]string{"job-name": "train"}
	mine := &metav1.LabelSelector{MatchLabels: own}
	others := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
	antiAffinity := func(key string, sel *metav1.LabelSelector) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: key, LabelSelector: sel}}}}
	}
	spread := func(key string, skew int32, when corev1.UnsatisfiableConstraintAction, sel *metav1.LabelSelector) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{{TopologyKey: key, MaxSkew: skew, WhenUnsatisfiable: when, LabelSelector: sel}}
	}
	cases := map[string]struct {
		spec corev1.PodSpec
		want int32
		err  string
	}{
		"nothing stated":      {},
		"a host port":         {spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}}}}, want: 1},
		"a container port":    {spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
		"apart from its own":  {spec: corev1.PodSpec{Affinity: antiAffinity(corev1.LabelHostname, mine)}, want: 1},
		"apart from others":   {spec: corev1.PodSpec{Affinity: antiAffinity(corev1.LabelHostname, others)}, err: "anti-affinity"},
		"apart by zone":       {spec: corev1.PodSpec{Affinity: antiAffinity(corev1.LabelTopologyZone, mine)}, err: `topologyKey "topology.kubernetes.io/zone"`},
		"spread over nodes":   {spec: corev1.PodSpec{TopologySpreadConstraints: spread(corev1.LabelHostname, 2, corev1.DoNotSchedule, mine)}, want: 2},
		"spread, tightest":    {spec: corev1.PodSpec{TopologySpreadConstraints: spread(corev1.LabelHostname, 2, corev1.DoNotSchedule, mine), Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{HostPort: 1}}}}}, want: 1},
		"spread, if it can":   {spec: corev1.PodSpec{TopologySpreadConstraints: spread(corev1.LabelTopologyZone, 1, corev1.ScheduleAnyway, mine)}},
		"spread over zones":   {spec: corev1.PodSpec{TopologySpreadConstraints: spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, mine)}, err: "DoNotSchedule topology spread"},
		"a pod affinity":      {spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname, LabelSelector: mine}}}}}, err: "required pod affinity"},
		"a preferred one too": {spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 1}}}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := maxPerNode(&corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: own}, Spec: tc.spec})
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one saying %q", err, tc.err)
			case tc.err == "" && (err != nil || got != tc.want):
				t.Errorf("maxPerNode %d (%v), want %d", got, err, tc.want)
			}
		})
	}
}
