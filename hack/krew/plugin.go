package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Platform is an operating system and architecture.
type Platform struct{ OS, Arch string }

// Archive is a written release archive.
type Archive struct {
	Platform Platform
	Name     string
	SHA256   string
}

// WriteArchive writes kubectl-gantry_<os>_<arch>.tar.gz into dir, with the binary and the completion
// script at its root, and says its sha256. Equal inputs give equal bytes: no times, owners or modes
// come from the machine.
func WriteArchive(dir string, p Platform, binary, completion []byte) (Archive, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{"kubectl-gantry", binary}, {"kubectl_complete-gantry", completion}} {
		hdr := &tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.data)), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return Archive{}, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return Archive{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return Archive{}, err
	}
	if err := gz.Close(); err != nil {
		return Archive{}, err
	}
	a := Archive{Platform: p, Name: fmt.Sprintf("kubectl-gantry_%s_%s.tar.gz", p.OS, p.Arch)}
	sum := sha256.Sum256(buf.Bytes())
	a.SHA256 = hex.EncodeToString(sum[:])
	return a, os.WriteFile(filepath.Join(dir, a.Name), buf.Bytes(), 0o644)
}

// Plugin is a krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
type Plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec PluginSpec `json:"spec"`
}

// PluginSpec is what krew installs.
type PluginSpec struct {
	Version          string           `json:"version"`
	Homepage         string           `json:"homepage"`
	ShortDescription string           `json:"shortDescription"`
	Description      string           `json:"description"`
	Platforms        []PluginPlatform `json:"platforms"`
}

// PluginPlatform is the archive for one platform.
type PluginPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Manifest is the krew manifest installing the archives from url.
func Manifest(version, url string, archives []Archive) ([]byte, error) {
	if !semver.MatchString(version) {
		return nil, fmt.Errorf("version %q is not a v-prefixed semantic version (v1.2.3), as krew requires", version)
	}
	if !strings.HasPrefix(url, "https://") {
		return nil, fmt.Errorf("url %q: krew downloads archives over https only", url)
	}
	p := Plugin{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	p.Metadata.Name = "gantry"
	p.Spec = PluginSpec{Version: version, Homepage: "https://github.com/gantry-dev/gantry",
		ShortDescription: "Operate a Gantry fleet: worker clusters, queues, why jobs wait",
		Description: "kubectl gantry reads the hub cluster of a Gantry multi-cluster batch fleet with your kubeconfig:\n" +
			"worker clusters and their GPUs, global queues and their quota, jobs with their position and cluster,\n" +
			"and explains in plain words why a job waits and where it runs.\n"}
	for _, a := range archives {
		var pp PluginPlatform
		pp.Selector.MatchLabels = map[string]string{"os": a.Platform.OS, "arch": a.Platform.Arch}
		pp.URI, pp.SHA256, pp.Bin = strings.TrimSuffix(url, "/")+"/"+a.Name, a.SHA256, "kubectl-gantry"
		p.Spec.Platforms = append(p.Spec.Platforms, pp)
	}
	return yaml.Marshal(p)
}
