// Package helmchart renders Gantry's Helm chart (deploy/charts/gantry) with the Helm SDK, for the
// manifests rendered from it and for the tests that check what it installs.
package helmchart

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gantry-dev/gantry/internal/manifest"
)

const (
	// ReleaseName is the release the docs and tests install. Nothing users refer to depends on it.
	ReleaseName = "gantry"
	// Namespace is where the chart goes: the agent and the hub's access to a worker must be there.
	Namespace = "gantry-system"
	// KubeVersion is the Kubernetes version Render renders for: the oldest the hub supports.
	KubeVersion = "v1.36.0"
	// OldestWorkerKubeVersion is the oldest Kubernetes a worker (role agent) may run.
	OldestWorkerKubeVersion = "v1.33.0"
)

// Chart is a loaded chart.
type Chart = chart.Chart

// Document is one rendered object, with the comments its template carries.
type Document struct {
	// Source is the template it came from, relative to the chart: templates/hub/rbac.yaml.
	Source string
	// YAML is the document without the Source line.
	YAML string
}

// Load reads the chart from its directory.
func Load(path string) (*chart.Chart, error) {
	ch, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading the chart %s: %w", path, err)
	}
	return ch, nil
}

// Render renders ch as helm template would for KubeVersion: values checked against values.schema.json,
// no cluster contacted. The documents keep the order of their templates.
func Render(ch *chart.Chart, namespace string, values map[string]any) ([]Document, error) {
	return RenderFor(ch, namespace, values, KubeVersion)
}

// RenderFor renders ch as Render does, for a cluster of that Kubernetes version.
func RenderFor(ch *chart.Chart, namespace string, values map[string]any, kubeVersion string) ([]Document, error) {
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = ReleaseName
	install.Namespace = namespace
	install.Replace = true
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kv
	rel, err := install.Run(ch, values)
	if err != nil {
		return nil, err
	}
	return split(rel.(*release.Release).Manifest), nil
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (\S+)\n`)

func split(manifest string) []Document {
	parts := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var docs []Document
	for _, k := range keys {
		text := parts[k]
		m := sourceLine.FindStringSubmatchIndex(text)
		if m == nil {
			continue
		}
		src := text[m[2]:m[3]]
		// Sources are named <chart>/templates/...; the chart's name is not part of where a file lives.
		if i := strings.Index(src, "/"); i >= 0 {
			src = src[i+1:]
		}
		body := strings.TrimSpace(text[:m[0]] + text[m[1]:])
		if body == "" {
			continue
		}
		docs = append(docs, Document{Source: path.Clean(src), YAML: body + "\n"})
	}
	return docs
}

// Objects decodes the documents.
func Objects(docs []Document) ([]*unstructured.Unstructured, error) {
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		u, err := manifest.Decode([]byte(d.YAML))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		objs = append(objs, u...)
	}
	return objs, nil
}
