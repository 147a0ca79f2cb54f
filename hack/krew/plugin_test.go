package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The manifest points each platform at its archive with the archive's real sha256, and the archive holds
// the binary and the completion script, executable, at its root.
func TestManifestAndArchives(t *testing.T) {
	dir := t.TempDir()
	var archives []Archive
	for _, p := range platforms {
		a, err := WriteArchive(dir, p, []byte("binary for "+p.OS+"/"+p.Arch), []byte("#!/bin/sh\n"))
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, a)
	}
	data, err := Manifest("v0.2.0", "https://example.org/releases/v0.2.0/", archives)
	if err != nil {
		t.Fatal(err)
	}
	var p Plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("manifest does not decode: %v\n%s", err, data)
	}
	if p.Kind != "Plugin" || p.Metadata.Name != "gantry" || p.Spec.Version != "v0.2.0" || len(p.Spec.Platforms) != len(platforms) {
		t.Fatalf("manifest: %+v", p)
	}
	for _, pp := range p.Spec.Platforms {
		os, arch := pp.Selector.MatchLabels["os"], pp.Selector.MatchLabels["arch"]
		name := "kubectl-gantry_" + os + "_" + arch + ".tar.gz"
		if pp.URI != "https://example.org/releases/v0.2.0/"+name || pp.Bin != "kubectl-gantry" {
			t.Errorf("platform %s/%s: uri %q bin %q", os, arch, pp.URI, pp.Bin)
		}
		files := readArchive(t, filepath.Join(dir, name), pp.SHA256)
		if files["kubectl-gantry"] != "binary for "+os+"/"+arch || files["kubectl_complete-gantry"] != "#!/bin/sh\n" {
			t.Errorf("archive %s holds %v", name, files)
		}
	}
}

func TestManifestRefusesWhatKrewRefuses(t *testing.T) {
	for _, tc := range []struct{ version, url, want string }{
		{"0.2.0", "https://example.org", "semantic version"},
		{"v0.2", "https://example.org", "semantic version"},
		{"v0.2.0", "http://example.org", "https only"},
	} {
		if _, err := Manifest(tc.version, tc.url, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Manifest(%q, %q): %v, want an error saying %q", tc.version, tc.url, err, tc.want)
		}
	}
}

// readArchive checks the archive's sha256 and returns its executable files by name.
func readArchive(t *testing.T, path, sha string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != sha {
		t.Fatalf("%s: sha256 differs from the manifest's", path)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		if hdr.Mode&0o111 != 0 {
			files[hdr.Name] = string(b)
		}
	}
}
