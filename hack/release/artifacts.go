package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/registry"

	"github.com/gantry-dev/gantry/internal/helmchart"
)

var semver = regexp.MustCompile(`^v(\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)$`)

// chartVersionOf is the chart's version for a release: v0.3.0 -> 0.3.0 (Helm wants SemVer without v).
func chartVersionOf(version string) (string, error) {
	m := semver.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("version %q is not v<major>.<minor>.<patch>[-<pre-release>]", version)
	}
	return m[1], nil
}

// releaseNotes is the section of the changelog headed "## <version>" (anything may follow on that line,
// such as a date), up to the next "## " heading.
func releaseNotes(changelog, version string) (string, error) {
	var out []string
	in := false
	for _, line := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			fields := strings.Fields(strings.TrimPrefix(line, "## "))
			in = len(fields) > 0 && fields[0] == version
		}
		if in {
			out = append(out, line)
		}
	}
	if len(out) == 0 {
		return "", fmt.Errorf("CHANGELOG.md has no section \"## %s\": write the release's notes first", version)
	}
	return strings.TrimSpace(strings.Join(out, "\n")) + "\n", nil
}

// imageRegistryLine is the values.yaml line that names the images' registry.
var imageRegistryLine = regexp.MustCompile(`(?m)^  registry: \S+$`)

// stampChart sets the chart's version and appVersion (the default image tag), and its default image
// registry when the images are pushed elsewhere than the chart's default. values.yaml is edited as
// text so that its comments stay.
func stampChart(ch *helmchart.Chart, chartVersion, appVersion, imageRegistry string) error {
	ch.Metadata.Version = chartVersion
	ch.Metadata.AppVersion = appVersion
	if imageRegistry == "" {
		return nil
	}
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if n := len(imageRegistryLine.FindAllIndex(f.Data, -1)); n != 1 {
			return fmt.Errorf("values.yaml has %d lines \"  registry: ...\", want the one under image", n)
		}
		f.Data = imageRegistryLine.ReplaceAll(f.Data, []byte("  registry: "+imageRegistry))
		img, _ := ch.Values["image"].(map[string]any)
		if img == nil {
			return fmt.Errorf("values.yaml has no image section")
		}
		img["registry"] = imageRegistry
		return nil
	}
	return fmt.Errorf("the chart has no values.yaml")
}

// writeChartAndManifests packages the chart into dir and renders its install manifests there.
func writeChartAndManifests(ch *helmchart.Chart, dir string) error {
	if _, err := chartutil.Save(ch, dir); err != nil {
		return fmt.Errorf("packaging the chart: %w", err)
	}
	manifests, err := installManifests(ch)
	if err != nil {
		return err
	}
	for name, content := range manifests {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// roleManifests are the install manifests, by file, and the chart's role each renders.
var roleManifests = map[string]string{"install-hub.yaml": "hub", "install-worker.yaml": "agent"}

// agentConfig is the agent's ConfigMap, which names its cluster: made apart on each worker.
const agentConfig = "templates/agent/config.yaml"

// installManifests renders the chart once per role, with its namespace and CRDs first, as kubectl
// apply --server-side -f takes it.
func installManifests(ch *helmchart.Chart) (map[string]string, error) {
	var crds []string
	for _, c := range ch.CRDObjects() {
		crds = append(crds, fmt.Sprintf("# Source: %s\n%s", c.Name, strings.TrimPrefix(string(c.File.Data), "---\n")))
	}
	sort.Strings(crds)
	out := map[string]string{}
	for file, role := range roleManifests {
		values := map[string]any{"role": role, "namespace": map[string]any{"create": true}}
		if role == "agent" {
			values["agent"] = map[string]any{"clusterName": "set-apart"} // its ConfigMap is left out
		}
		docs, err := helmchart.Render(ch, helmchart.Namespace, values)
		if err != nil {
			return nil, fmt.Errorf("rendering the chart for role %s: %w", role, err)
		}
		parts := append([]string{}, crds...)
		for _, d := range docs {
			if d.Source != agentConfig {
				parts = append(parts, fmt.Sprintf("# Source: %s\n%s", d.Source, d.YAML))
			}
		}
		out[file] = fmt.Sprintf("# Gantry %s, role %s: kubectl apply --server-side -f %s\n---\n%s", ch.Metadata.AppVersion, role, file,
			strings.Join(parts, "---\n"))
	}
	return out, nil
}

// pushAll pushes the packaged chart to oci://<registry>/gantry:<chart version>; the images went with
// buildImages. A registry on a loopback address is spoken to over plain HTTP, as for the images.
func pushAll(dir string, ch *helmchart.Chart, reg string) error {
	data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s-%s.tgz", ch.Name(), ch.Metadata.Version)))
	if err != nil {
		return err
	}
	var opts []registry.ClientOption
	if loopback(reg) {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return err
	}
	ref := fmt.Sprintf("%s/%s:%s", reg, ch.Name(), ch.Metadata.Version)
	res, err := client.Push(data, ref)
	if err != nil {
		return fmt.Errorf("pushing the chart to oci://%s: %w", ref, err)
	}
	fmt.Printf("oci://%s@%s\n", ref, res.Manifest.Digest)
	return nil
}

// loopback says whether the registry prefix's host is a loopback address or localhost.
func loopback(reg string) bool {
	host := strings.SplitN(reg, "/", 2)[0]
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// writeSums writes SHA256SUMS of every file under dir, in sha256sum's format.
func writeSums(dir string) error {
	var b bytes.Buffer
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), b.Bytes(), 0o644)
}
