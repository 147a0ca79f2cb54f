// Command manifests renders the kustomize bases and overlays under deploy/ from the Helm chart, so that
// both ways to install Gantry apply the same objects and rights: make manifests runs it, make verify
// fails when a checked-in file differs from what the chart renders.
//
//	go run ./hack/manifests -chart deploy/charts/gantry -out deploy
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gantry-dev/gantry/internal/helmchart"
)

// header opens every rendered file.
const header = "# Rendered from deploy/charts/gantry by make manifests: edit the chart, not this file.\n"

// bases maps a template directory of the chart to the kustomize base rendered from it. The agent's
// ConfigMap, which names the cluster, and the optional monitoring objects are left to the chart.
var bases = map[string]string{
	"templates/namespace.yaml":      "namespace",
	"templates/metrics-reader.yaml": "metrics",
	"templates/hub":                 "hub",
	"templates/agent":               "agent",
	"templates/worker":              "worker",
}

var skipped = map[string]bool{"templates/agent/config.yaml": true}

// overlays are what a cluster applies with kubectl apply --server-side -k deploy/overlays/<name>.
var overlays = map[string][]string{
	"hub":    {"../../namespace", "../../crd", "../../metrics", "../../hub"},
	"worker": {"../../namespace", "../../crd", "../../metrics", "../../agent", "../../worker"},
	"both":   {"../../namespace", "../../crd", "../../metrics", "../../hub", "../../agent", "../../worker"},
}

// renderValues turn on everything the bases hold; clusterName only satisfies the chart, its ConfigMap
// is not rendered.
var renderValues = map[string]any{
	"role":      "both",
	"namespace": map[string]any{"create": true},
	"agent":     map[string]any{"clusterName": "rendered"},
}

func main() {
	chartDir := flag.String("chart", "deploy/charts/gantry", "The chart's directory.")
	out := flag.String("out", "deploy", "The directory the bases and overlays go under.")
	flag.Parse()
	if err := run(*chartDir, *out); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(chartDir, out string) error {
	ch, err := helmchart.Load(chartDir)
	if err != nil {
		return err
	}
	docs, err := helmchart.Render(ch, helmchart.Namespace, renderValues)
	if err != nil {
		return err
	}
	files, err := baseFiles(docs)
	if err != nil {
		return err
	}
	crds, err := filepath.Glob(filepath.Join(out, "crd", "*.yaml"))
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if filepath.Base(crd) != "kustomization.yaml" {
			files[filepath.Join("crd", filepath.Base(crd))] = ""
		}
	}
	for name, resources := range overlays {
		files[filepath.Join("overlays", name, "kustomization.yaml")] = kustomization(resources)
	}
	return write(out, files)
}

// baseFiles groups the rendered documents by the file of their base; each file keeps its template's
// name and its objects in install order.
func baseFiles(docs []helmchart.Document) (map[string]string, error) {
	files := map[string]string{}
	for _, d := range docs {
		if skipped[d.Source] {
			continue
		}
		base, ok := bases[d.Source]
		if !ok {
			base, ok = bases[filepath.Dir(d.Source)]
		}
		if !ok {
			continue
		}
		f := filepath.Join(base, filepath.Base(d.Source))
		if files[f] != "" {
			files[f] += "---\n"
		}
		files[f] += d.YAML
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("the chart rendered nothing for the bases")
	}
	return files, nil
}

// write writes each file with its header, and each directory's kustomization.yaml listing its files;
// an empty content marks a file that is there already (the CRDs) and is only listed.
func write(out string, files map[string]string) error {
	if err := removeRendered(out); err != nil {
		return err
	}
	dirs := map[string][]string{}
	for f, content := range files {
		dirs[filepath.Dir(f)] = append(dirs[filepath.Dir(f)], filepath.Base(f))
		if content == "" || filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		if err := writeFile(filepath.Join(out, f), header+content); err != nil {
			return err
		}
	}
	for dir, names := range dirs {
		if strings.HasPrefix(dir, "overlays") {
			if err := writeFile(filepath.Join(out, dir, "kustomization.yaml"), files[filepath.Join(dir, "kustomization.yaml")]); err != nil {
				return err
			}
			continue
		}
		sort.Strings(names)
		if err := writeFile(filepath.Join(out, dir, "kustomization.yaml"), kustomization(names)); err != nil {
			return err
		}
	}
	return nil
}

// removeRendered deletes what an earlier run rendered, so that a template removed from the chart
// leaves no file behind.
func removeRendered(out string) error {
	var dirs []string
	for _, base := range bases {
		dirs = append(dirs, base)
	}
	for name := range overlays {
		dirs = append(dirs, filepath.Join("overlays", name))
	}
	for _, dir := range dirs {
		old, err := filepath.Glob(filepath.Join(out, dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(filepath.Join(out, "crd", "kustomization.yaml")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

func kustomization(resources []string) string {
	var b strings.Builder
	b.WriteString(header + "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n")
	for _, r := range resources {
		fmt.Fprintf(&b, "- %s\n", r)
	}
	return b.String()
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}
