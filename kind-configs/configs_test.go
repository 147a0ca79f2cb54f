// Package kindconfigs holds the kind cluster configurations of the kind path (hack/kind.sh) and the test
// that loads them as kind does.
package kindconfigs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
)

// load decodes a kind configuration the way kind create cluster --config does: apiVersion and kind
// first, then a strict decode into kind's v1alpha4 types (an unknown field is an error), then kind's
// defaults. kind's loader itself is in an internal package of kind.
func load(path string) (*kindv1alpha4.Cluster, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tm struct {
		Kind       string `yaml:"kind"`
		APIVersion string `yaml:"apiVersion"`
	}
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion != "kind.x-k8s.io/v1alpha4" || tm.Kind != "Cluster" {
		return nil, fmt.Errorf("kind %s of apiVersion %s is not a kind cluster configuration", tm.Kind, tm.APIVersion)
	}
	cfg := &kindv1alpha4.Cluster{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return nil, err
	}
	kindv1alpha4.SetDefaultsCluster(cfg)
	return cfg, nil
}

func TestEveryConfigLoads(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"hub.yaml": true, "worker-1.yaml": true, "worker-2.yaml": true}
	if len(files) != len(want) {
		t.Errorf("configs %v, want %d", files, len(want))
	}
	for _, f := range files {
		cfg, err := load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		name := strings.TrimSuffix(f, ".yaml")
		if cfg.Name != "gantry-"+name {
			t.Errorf("%s names cluster %q, want gantry-%s (hack/kind.sh uses that name)", f, cfg.Name, name)
		}
		checkNodes(t, f, cfg, strings.HasPrefix(name, "worker-"))
	}
}

// checkNodes checks one control plane, and GPU product labels on a worker's nodes only.
func checkNodes(t *testing.T, f string, cfg *kindv1alpha4.Cluster, worker bool) {
	t.Helper()
	planes, labelled := 0, 0
	for _, n := range cfg.Nodes {
		switch n.Role {
		case kindv1alpha4.ControlPlaneRole:
			planes++
		case kindv1alpha4.WorkerRole:
		default:
			t.Errorf("%s: node role %q", f, n.Role)
		}
		if n.Labels["nvidia.com/gpu.product"] != "" {
			labelled++
		}
	}
	if planes != 1 {
		t.Errorf("%s: %d control planes, want 1", f, planes)
	}
	if worker != (labelled > 0) {
		t.Errorf("%s: %d nodes with a GPU product label", f, labelled)
	}
}

// A mistake in a configuration is an error, as it is to kind.
func TestAMisspelledFieldIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(path, []byte("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n  lables: {a: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := load(path); err == nil || !strings.Contains(err.Error(), "lables") {
		t.Errorf("a misspelled field: %v", err)
	}
}
