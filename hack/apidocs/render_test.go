package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

var update = flag.Bool("update", false, "Write testdata/api-reference.md from the fixture CRDs.")

// TestRenderTheFixtureCRDs renders the CRDs of testdata/crds (a kind stored as v1beta1 and served as a
// deprecated v1alpha1, one of a single version, one whose served versions differ) and compares the page
// with testdata/api-reference.md. go test ./hack/apidocs -update writes that file anew.
func TestRenderTheFixtureCRDs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "api-reference.md")
	if err := run("testdata/crds", out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := "testdata/api-reference.md"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("the page differs from %s (-want +got); go test ./hack/apidocs -update writes it anew:\n%s", golden, diff)
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	crds, err := readCRDs("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	first, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		again, err := Render(crds)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("render %d differs from the first", i+2)
		}
	}
}

// TestRenderSaysWhatEachVersionIs checks the facts a reader looks for first, by kind.
func TestRenderSaysWhatEachVersionIs(t *testing.T) {
	crds, err := readCRDs("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	page, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| [Widget](#widget) | `gantry.dev` | Namespaced | `v1beta1` | `v1alpha1` (deprecated) |",
		"| [Gadget](#gadget) | `gantry.dev` | Cluster | `v1alpha1` | none |",
		"- Also served: `v1alpha1`, deprecated (the API server warns: gantry.dev/v1alpha1 Widget is deprecated; use gantry.dev/v1beta1 Widget); the same schema as `v1beta1`",
		"- Not served: `v1alpha0`",
		"**Fields in `v1beta1`**",
		"| `spec.size` | string | yes | `Small` | one of `Small`, `Large` | Size of the widget. |",
		"| `spec` | `!has(self.timeout) \\|\\| self.size == 'Large'` | only a Large widget takes a timeout (on `.timeout`) |",
		"| `status.conditions` | []Condition |",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(string(page), "status.conditions[].reason") {
		t.Error("the page lists the fields of a condition")
	}
}

func TestRenderRefusesACRDWithoutOneStoredVersion(t *testing.T) {
	crds, err := readCRDs("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	for name, stored := range map[string]bool{"none stored": false, "all stored": true} {
		crd := crds[2].DeepCopy() // widgets: three versions
		for i := range crd.Spec.Versions {
			crd.Spec.Versions[i].Storage = stored
		}
		if _, err := Render([]apiextensionsv1.CustomResourceDefinition{*crd}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestTheProjectsCRDsRender renders deploy/crd, whatever its versions are now; make verify checks that
// docs/api-reference.md is what it renders.
func TestTheProjectsCRDsRender(t *testing.T) {
	crds, err := readCRDs("../../deploy/crd")
	if err != nil {
		t.Fatal(err)
	}
	page, err := Render(crds)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CapacityReport", "Cohort", "GlobalQueue", "Queue", "WorkerCluster", "WorkerClusterSet", "Workload"} {
		if !strings.Contains(string(page), "\n## "+k+"\n") {
			t.Errorf("the page has no section %s", k)
		}
	}
}
