// Command apidocs writes the API reference, docs/api-reference.md, from Gantry's CRDs: for each kind
// its group, the version stored and the other versions served (deprecated ones marked), and its fields
// with their types, defaults, enums, limits and CEL rules. make manifests runs it after the CRDs are
// generated; make verify fails when the checked-in page differs from what it writes. Run from the
// repository root:
//
//	go run ./hack/apidocs -crds deploy/crd -out docs/api-reference.md
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	crds := flag.String("crds", "deploy/crd", "Directory of the CRDs, read from its files gantry.dev_*.yaml.")
	out := flag.String("out", "docs/api-reference.md", "File the reference is written to.")
	flag.Parse()
	if err := run(*crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

func run(dir, out string) error {
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	page, err := Render(crds)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, page, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// readCRDs reads the CRDs of dir's files gantry.dev_*.yaml, in the order of their names.
func readCRDs(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "gantry.dev_*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRD files gantry.dev_*.yaml in %s", dir)
	}
	sort.Strings(files)
	crds := make([]apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("reading the CRD of %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s holds a %s, not a CustomResourceDefinition", f, crd.Kind)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
