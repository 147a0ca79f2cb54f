package main

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const generated = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: queues.gantry.dev
spec:
  group: gantry.dev
  names:
    kind: Queue
    plural: queues
  scope: Namespaced
  versions:
  - name: v1beta1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            type: object
        type: object
    served: true
    storage: true
    subresources:
      status: {}
`

type version struct {
	Name               string         `json:"name"`
	Served             bool           `json:"served"`
	Storage            bool           `json:"storage"`
	Deprecated         bool           `json:"deprecated"`
	DeprecationWarning string         `json:"deprecationWarning"`
	Schema             map[string]any `json:"schema"`
	Subresources       map[string]any `json:"subresources"`
}

func versionsOf(t *testing.T, crd []byte) []version {
	t.Helper()
	var doc struct {
		Spec struct {
			Versions []version `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(bytes.TrimPrefix(crd, []byte(yamlStart)), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Spec.Versions
}

// An earlier version is served beside the stored one with its schema and subresources, deprecated,
// never stored; the stored version is left as generated.
func TestAnEarlierVersionIsServedDeprecated(t *testing.T) {
	out, err := addServed([]byte(generated), []string{"v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte(generated)) {
		t.Errorf("the generated part changed:\n%s", out)
	}
	vs := versionsOf(t, out)
	if len(vs) != 2 {
		t.Fatalf("%d versions, want 2", len(vs))
	}
	old := vs[1]
	if old.Name != "v1alpha1" || !old.Served || old.Storage || !old.Deprecated {
		t.Errorf("v1alpha1: %+v", old)
	}
	if !strings.Contains(old.DeprecationWarning, "use gantry.dev/v1beta1 Queue") {
		t.Errorf("warning %q does not name the version to use", old.DeprecationWarning)
	}
	if old.Schema == nil || old.Subresources == nil {
		t.Errorf("v1alpha1 lacks the stored version's schema or subresources: %+v", old)
	}
	again, err := addServed(out, []string{"v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, out) {
		t.Errorf("a second run changed the CRD")
	}
}

func TestACRDWithoutAStoredVersionIsRefused(t *testing.T) {
	if _, err := addServed([]byte(strings.Replace(generated, "storage: true", "storage: false", 1)), []string{"v1alpha1"}); err == nil {
		t.Error("no error")
	}
}
