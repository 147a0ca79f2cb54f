package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	helmregistry "helm.sh/helm/v4/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/internal/helmchart"
	"github.com/gantry-dev/gantry/internal/manifest"
)

func TestChartVersionOf(t *testing.T) {
	for in, want := range map[string]string{"v0.3.0": "0.3.0", "v1.2.3-rc.1": "1.2.3-rc.1"} {
		if got, err := chartVersionOf(in); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0.3.0", "v0.3", "v0.3.0+x", "latest"} {
		if _, err := chartVersionOf(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

const changelog = `# Changelog

## Unreleased
- something coming

## v0.3.0 (2026-12-07)
### Added
- a release

## v0.2.0
- older
`

func TestReleaseNotesAreTheVersionsSection(t *testing.T) {
	notes, err := releaseNotes(changelog, "v0.3.0")
	if err != nil {
		t.Fatal(err)
	}
	if want := "## v0.3.0 (2026-12-07)\n### Added\n- a release\n"; notes != want {
		t.Errorf("notes %q, want %q", notes, want)
	}
	if _, err := releaseNotes(changelog, "v0.4.0"); err == nil || !strings.Contains(err.Error(), `no section "## v0.4.0"`) {
		t.Errorf("a version without a section: %v", err)
	}
	if _, err := releaseNotes(changelog, "v0.3"); err == nil {
		t.Error("a prefix of a version matched its section")
	}
}

func loadChart(t *testing.T) *helmchart.Chart {
	t.Helper()
	ch, err := helmchart.Load(filepath.Join("..", "..", "deploy", "charts", "gantry"))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// images are the images of the rendered Deployments.
func images(t *testing.T, yamlDocs string) []string {
	t.Helper()
	objs, err := manifest.Decode([]byte(yamlDocs))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			out = append(out, c.Image)
		}
	}
	return out
}

// The packaged chart carries the release's version; installed with no values it pulls the images
// tagged with it, from the registry they were pushed to; values.yaml keeps its comments.
func TestThePackagedChartInstallsTheReleasesImages(t *testing.T) {
	ch := loadChart(t)
	if err := stampChart(ch, "0.3.0", "v0.3.0", "registry.example/gantry"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeChartAndManifests(ch, dir); err != nil {
		t.Fatal(err)
	}
	packaged, err := loader.Load(filepath.Join(dir, "gantry-0.3.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if packaged.Metadata.Version != "0.3.0" || packaged.Metadata.AppVersion != "v0.3.0" {
		t.Errorf("packaged chart %s, appVersion %s", packaged.Metadata.Version, packaged.Metadata.AppVersion)
	}
	for _, f := range packaged.Raw {
		if f.Name == "values.yaml" && !strings.Contains(string(f.Data), "# tag defaults to the chart's appVersion.") {
			t.Error("the packaged values.yaml lost its comments")
		}
	}
	docs, err := helmchart.Render(packaged, helmchart.Namespace, map[string]any{"role": "both", "agent": map[string]any{"clusterName": "w"}})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, d := range docs {
		all = append(all, d.YAML)
	}
	got := images(t, strings.Join(all, "---\n"))
	want := []string{"registry.example/gantry/gantry-hub:v0.3.0", "registry.example/gantry/gantry-agent:v0.3.0"}
	if len(got) != 2 || !contains(got, want[0]) || !contains(got, want[1]) {
		t.Errorf("images %v, want %v", got, want)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Each role's install manifest holds the namespace, every CRD first, and its role's parts at the
// release's image tag; the worker's leaves its cluster name's ConfigMap to be made apart.
func TestInstallManifestsPerRole(t *testing.T) {
	ch := loadChart(t)
	if err := stampChart(ch, "0.3.0", "v0.3.0", ""); err != nil {
		t.Fatal(err)
	}
	out, err := installManifests(ch)
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"install-hub.yaml": "ghcr.io/gantry-dev/gantry-hub:v0.3.0", "install-worker.yaml": "ghcr.io/gantry-dev/gantry-agent:v0.3.0"} {
		objs, err := manifest.Decode([]byte(out[file]))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		kinds := map[string]int{}
		firstNonCRD := -1
		for i, o := range objs {
			kinds[o.GetKind()]++
			if o.GetKind() != "CustomResourceDefinition" && firstNonCRD < 0 {
				firstNonCRD = i
			}
			if o.GetKind() == "CustomResourceDefinition" && firstNonCRD >= 0 {
				t.Errorf("%s: CRD %s after other objects", file, o.GetName())
			}
			if o.GetKind() == "ConfigMap" && o.GetName() == "gantry-agent" {
				t.Errorf("%s holds the agent's ConfigMap", file)
			}
		}
		if kinds["CustomResourceDefinition"] != 8 || kinds["Namespace"] != 1 || kinds["Deployment"] != 1 {
			t.Errorf("%s: kinds %v", file, kinds)
		}
		if got := images(t, out[file]); len(got) != 1 || got[0] != want {
			t.Errorf("%s: images %v, want %s", file, got, want)
		}
	}
}

// make release with a registry pushes the chart as an OCI artifact Helm pulls back (go-containerregistry's
// registry, in memory, on loopback).
func TestTheChartIsPushedToAnOCIRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ch := loadChart(t)
	if err := stampChart(ch, "0.3.0", "v0.3.0", host+"/gantry"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeChartAndManifests(ch, dir); err != nil {
		t.Fatal(err)
	}
	if err := pushAll(dir, ch, host+"/gantry"); err != nil {
		t.Fatal(err)
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := client.Pull(host + "/gantry/gantry:0.3.0")
	if err != nil {
		t.Fatalf("pulling the chart back: %v", err)
	}
	local, err := os.ReadFile(filepath.Join(dir, "gantry-0.3.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if string(pulled.Chart.Data) != string(local) {
		t.Error("the pulled chart differs from the packaged one")
	}
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(pulled.Config.Data, &meta); err != nil || meta.AppVersion != "v0.3.0" {
		t.Errorf("pulled chart's appVersion %q (%v)", meta.AppVersion, err)
	}
}

func TestLoopbackRegistries(t *testing.T) {
	for reg, want := range map[string]bool{"127.0.0.1:5000/g": true, "localhost:5000": true, "[::1]:5000/x": true,
		"registry.example/gantry": false, "ghcr.io/gantry-dev": false} {
		if got := loopback(reg); got != want {
			t.Errorf("%s: %v", reg, got)
		}
	}
}
