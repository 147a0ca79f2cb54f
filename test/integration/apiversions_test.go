package integration

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// gantry.dev/v1alpha1 is still served, with the fields of v1beta1 and a deprecation warning: a client of
// the earlier release (an agent one version older) writes and reads the same objects without a
// conversion webhook.
func TestTheEarlierAPIVersionIsStillServed(t *testing.T) {
	ctx := context.Background()
	heard := &warnings{}
	cfg := rest.CopyConfig(hubEnv.cfg)
	cfg.WarningHandler = heard
	old, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	gq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gantry.dev/v1alpha1", "kind": "GlobalQueue",
		"metadata": map[string]any{"name": "written-as-v1alpha1"},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "a"}},
			"clusters":          []any{map[string]any{"name": "worker-1", "quota": map[string]any{gantry.GPUResource: "4"}}},
		},
	}}
	if err := old.Create(ctx, gq); err != nil {
		t.Fatalf("creating a GlobalQueue as gantry.dev/v1alpha1: %v", err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, gq) })
	if w := strings.Join(heard.seen, "\n"); !strings.Contains(w, "gantry.dev/v1alpha1 GlobalQueue is deprecated; use gantry.dev/v1beta1 GlobalQueue") {
		t.Errorf("warnings %q do not say v1alpha1 is deprecated", w)
	}

	var now gantry.GlobalQueue
	if err := hubEnv.client.Get(ctx, client.ObjectKey{Name: gq.GetName()}, &now); err != nil {
		t.Fatalf("reading it as gantry.dev/v1beta1: %v", err)
	}
	if len(now.Spec.Clusters) != 1 || now.Spec.Clusters[0].Name != "worker-1" || now.Spec.Clusters[0].Quota.Name(gantry.GPUResource, "").Value() != 4 {
		t.Errorf("read as v1beta1: %+v", now.Spec.Clusters)
	}

	back := &unstructured.Unstructured{}
	back.SetAPIVersion("gantry.dev/v1alpha1")
	back.SetKind("GlobalQueue")
	if err := old.Get(ctx, client.ObjectKey{Name: gq.GetName()}, back); err != nil {
		t.Fatalf("reading it back as gantry.dev/v1alpha1: %v", err)
	}
	if back.GetAPIVersion() != "gantry.dev/v1alpha1" || back.GetUID() != now.UID {
		t.Errorf("read back as %s uid %s, want gantry.dev/v1alpha1 uid %s", back.GetAPIVersion(), back.GetUID(), now.UID)
	}
}
