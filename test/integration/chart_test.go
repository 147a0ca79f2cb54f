package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/helmchart"
)

// warnings keeps the API server's warnings, such as those of Pod Security's warn mode.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// Every object the chart renders, for each role and for values that turn everything on, is accepted by
// a real API server in a dry run, in a namespace that enforces the restricted Pod Security level: the
// objects validate, and the pods of its Deployments are admitted with no warning.
func TestChartDryRunsInRestrictedNamespace(t *testing.T) {
	ch, err := helmchart.Load(filepath.Join(repoRoot(), "deploy", "charts", "gantry"))
	if err != nil {
		t.Fatal(err)
	}
	agent := map[string]any{"clusterName": "worker-1"}
	for _, tc := range []struct {
		name   string
		on     *cluster
		values map[string]any
	}{
		{"hub", hubEnv, map[string]any{"role": "hub"}},
		{"agent", workers["worker-1"], map[string]any{"role": "agent", "agent": agent}},
		{"both", workers["worker-2"], map[string]any{"role": "both", "agent": agent}},
		{"everything on", workers["worker-2"], map[string]any{"role": "both", "agent": agent,
			"hub": map[string]any{"replicas": 3, "extraArgs": []any{"--pprof-bind-address=:6060"},
				"endpoint": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "gantry-endpoint-tls"}, "advertiseURL": "https://gantry.example.com:8443"}},
			"workerAccess": map[string]any{"longLivedToken": true}, "networkPolicy": map[string]any{"enabled": true},
			"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := helmchart.Render(ch, helmchart.Namespace, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := helmchart.Objects(docs)
			if err != nil {
				t.Fatal(err)
			}
			dryRunAll(t, tc.on, objs)
		})
	}
}

func dryRunAll(t *testing.T, on *cluster, objs []*unstructured.Unstructured) {
	ctx := context.Background()
	restrictNamespace(t, on, helmchart.Namespace)
	warned := &warnings{}
	cfg := rest.CopyConfig(on.cfg)
	cfg.WarningHandler = warned
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	for _, u := range objs {
		// The Prometheus Operator's CRDs are not on these servers; a unit test decodes those objects
		// strictly into its types instead.
		if u.GroupVersionKind().Group == "monitoring.coreos.com" {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll,
			client.FieldOwner("gantry-chart-test"), client.ForceOwnership); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "Deployment" {
			dryRunPodOf(t, c, u)
			pods++
		}
	}
	if pods == 0 {
		t.Error("the chart rendered no Deployment")
	}
	if len(warned.seen) > 0 {
		t.Errorf("the API server warned:\n%s", strings.Join(warned.seen, "\n"))
	}
	// The namespace enforces the level: a pod that runs as root is refused.
	root := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "root", Namespace: helmchart.Namespace},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := c.Create(ctx, root, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("a pod that breaks the restricted level: %v, want Forbidden", err)
	}
}

// dryRunPodOf creates, in a dry run, a pod of the Deployment's template: Pod Security enforces on pods.
func dryRunPodOf(t *testing.T, c client.Client, u *unstructured.Unstructured) {
	t.Helper()
	var d appsv1.Deployment
	if err := kruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-dry-run", Namespace: d.Namespace,
		Labels: d.Spec.Template.Labels}, Spec: d.Spec.Template.Spec}
	if err := c.Create(context.Background(), pod, client.DryRunAll); err != nil {
		t.Errorf("a pod of Deployment %s: %v", d.Name, err)
	}
}

// restrictNamespace labels the namespace for the restricted level (creating it when it is missing) and
// takes the labels off again at the end, for the tests that share the server.
func restrictNamespace(t *testing.T, on *cluster, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := on.client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	levels := []string{"pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/warn"}
	patch := func(value any) {
		labels := map[string]any{}
		for _, l := range levels {
			labels[l] = value
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err != nil {
			t.Fatal(err)
		}
		if err := on.client.Patch(ctx, ns, client.RawPatch(types.MergePatchType, body)); err != nil {
			t.Fatal(err)
		}
	}
	patch("restricted")
	t.Cleanup(func() { patch(nil) })
}
