// Command crdversions adds to each CRD that controller-gen generated from apis/ the earlier versions of
// the API that are still served. They have the stored version's schema, so the API server converts
// between them without a webhook (strategy None), and they are marked deprecated: clients that still
// use them (an agent one release older) get a warning. make manifests runs it after controller-gen:
//
//	go run ./hack/crdversions -dir deploy/crd -served v1alpha1
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	dir := flag.String("dir", "deploy/crd", "Directory of the generated CRDs (gantry.dev_*.yaml).")
	served := flag.String("served", "", "Comma-separated earlier versions to serve beside the stored one, deprecated.")
	flag.Parse()
	if err := run(*dir, splitList(*served)); err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(dir string, earlier []string) error {
	files, err := filepath.Glob(filepath.Join(dir, "gantry.dev_*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs (gantry.dev_*.yaml) in %s", dir)
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := addServed(in, earlier)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(f, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// yamlStart is how controller-gen opens each CRD file.
const yamlStart = "---\n"

// addServed returns the CRD with a deprecated copy of its stored version for each earlier version
// not listed yet, after the stored one. Running it twice changes nothing.
func addServed(crd []byte, earlier []string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(bytes.TrimPrefix(crd, []byte(yamlStart)), &doc); err != nil {
		return nil, err
	}
	spec, _ := doc["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	kind, _ := nested(spec, "names")["kind"].(string)
	group, _ := spec["group"].(string)
	stored, names := storedVersion(versions)
	if stored == nil {
		return nil, fmt.Errorf("no version with storage: true")
	}
	for _, v := range earlier {
		if names[v] {
			continue
		}
		dup, err := deepCopy(stored)
		if err != nil {
			return nil, err
		}
		dup["name"] = v
		dup["storage"] = false
		dup["served"] = true
		dup["deprecated"] = true
		dup["deprecationWarning"] = fmt.Sprintf("%s/%s %s is deprecated; use %s/%s %s, which has the same fields",
			group, v, kind, group, stored["name"], kind)
		versions = append(versions, dup)
	}
	spec["versions"] = versions
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte(yamlStart), out...), nil
}

// storedVersion is the version with storage: true, and the names of all versions listed.
func storedVersion(versions []any) (map[string]any, map[string]bool) {
	var stored map[string]any
	names := map[string]bool{}
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		names[name] = true
		if s, _ := m["storage"].(bool); s {
			stored = m
		}
	}
	return stored, names
}

func nested(m map[string]any, key string) map[string]any {
	out, _ := m[key].(map[string]any)
	return out
}

func deepCopy(m map[string]any) (map[string]any, error) {
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, yaml.Unmarshal(b, &out)
}
