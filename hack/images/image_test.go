package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/gantry-dev/gantry/internal/ociarchive"
)

var testSource = Source{Version: "v0.3.0", Commit: "0123456789abcdef", URL: sourceURL,
	Created: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}

func fakeBinaries() []Binary {
	return []Binary{
		{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Data: []byte("\x7fELF amd64 gantry-hub")},
		{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Data: []byte("\x7fELF arm64 gantry-hub")},
	}
}

func indexDigest(t *testing.T, src Source, bins []Binary) v1.Hash {
	t.Helper()
	idx, err := Index("gantry-hub", src, bins)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestIndexIsReproducible(t *testing.T) {
	first := indexDigest(t, testSource, fakeBinaries())
	if again := indexDigest(t, testSource, fakeBinaries()); again != first {
		t.Errorf("same inputs gave %s, then %s", first, again)
	}
	other := testSource
	other.Commit = "fedcba9876543210"
	if d := indexDigest(t, other, fakeBinaries()); d == first {
		t.Errorf("another commit gave the same digest %s", d)
	}
	bins := fakeBinaries()
	bins[1].Data = []byte("\x7fELF arm64 gantry-hub, changed")
	if d := indexDigest(t, testSource, bins); d == first {
		t.Errorf("another binary gave the same digest %s", d)
	}

	// The archive is byte-equal too.
	var a, b bytes.Buffer
	for _, buf := range []*bytes.Buffer{&a, &b} {
		idx, err := Index("gantry-hub", testSource, fakeBinaries())
		if err != nil {
			t.Fatal(err)
		}
		if err := writeArchive(buf, idx, "ghcr.io/gantry-dev/gantry-hub:v0.3.0", "v0.3.0", testSource.Created); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("writing the same index twice gave different archives")
	}
	checkTar(t, "archive", a.Bytes(), testSource.Created)
}

// checkTar checks that every entry of a tar is owned by 0:0, modified at mtime and in name order.
func checkTar(t *testing.T, what string, data []byte, mtime time.Time) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(mtime) {
			t.Errorf("%s: %s owned by %d:%d, modified %s; want 0:0, %s", what, hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, mtime)
		}
		names = append(names, hdr.Name)
		b, _ := io.ReadAll(tr)
		files[hdr.Name] = b
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("%s: entries not in name order: %v", what, names)
	}
	return files
}

func TestImageContents(t *testing.T) {
	idx, err := Index("gantry-hub", testSource, fakeBinaries())
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || im.Annotations["org.opencontainers.image.revision"] != testSource.Commit ||
		im.Annotations["org.opencontainers.image.created"] != "2026-03-01T12:00:00Z" {
		t.Errorf("index: media type %s, annotations %v", im.MediaType, im.Annotations)
	}
	var got []string
	for i, desc := range im.Manifests {
		got = append(got, desc.Platform.String())
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, fakeBinaries()[i])
	}
	if strings.Join(got, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", got)
	}
}

func checkImage(t *testing.T, img v1.Image, bin Binary) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("%s: not an OCI image of one layer: %+v", bin.Platform, m)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/gantry-hub" || c.WorkingDir != "/" ||
		cfg.OS != bin.Platform.OS || cfg.Architecture != bin.Platform.Architecture ||
		!cfg.Created.Equal(testSource.Created) || c.Labels["org.opencontainers.image.version"] != "v0.3.0" {
		t.Errorf("%s: config %+v", bin.Platform, cfg)
	}
	layers, _ := img.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	files := checkTar(t, "layer", data, testSource.Created)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "etc/ etc/group etc/passwd gantry-hub" {
		t.Errorf("%s: layer holds %v; want the binary, passwd and group and no shell", bin.Platform, names)
	}
	if !bytes.Equal(files["gantry-hub"], bin.Data) || !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") ||
		!strings.Contains(string(files["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("%s: binary or passwd/group wrong: %q %q", bin.Platform, files["etc/passwd"], files["etc/group"])
	}
}

// TestArchiveIsAnOCILayout reads the archive back as go-containerregistry's layout package and crane
// push read an unpacked OCI layout.
func TestArchiveIsAnOCILayout(t *testing.T) {
	dir := t.TempDir()
	archive, idx := testArchive(t, dir)
	unpacked := filepath.Join(dir, "layout")
	if err := ociarchive.UnpackFile(archive, unpacked); err != nil {
		t.Fatal(err)
	}
	top, err := layout.ImageIndexFromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations["io.containerd.image.name"] != "ghcr.io/gantry-dev/gantry-hub:v0.3.0" {
		t.Fatalf("index.json: %+v, want the index %s named for ctr import", im.Manifests, want)
	}
	read, err := top.ImageIndex(want)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := read.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range rm.Manifests {
		img, err := read.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := img.Layers(); err != nil {
			t.Fatal(err)
		}
		if d, err := img.Digest(); err != nil || d != desc.Digest {
			t.Errorf("image %s read back as %s, %v", desc.Digest, d, err)
		}
	}
}

// testArchive writes the archive of the fake binaries' index into dir, named as make images names it.
func testArchive(t *testing.T, dir string) (string, v1.ImageIndex) {
	t.Helper()
	idx, err := Index("gantry-hub", testSource, fakeBinaries())
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "gantry-hub.tar")
	var buf bytes.Buffer
	if err := writeArchive(&buf, idx, "ghcr.io/gantry-dev/gantry-hub:v0.3.0", "v0.3.0", testSource.Created); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return archive, idx
}

// TestArchiveUnpacksToARootFilesystem reads the archive back as the e2e tests do before they run an image
// under runc: the platform's file system holds the executable binary and the nonroot user, and the
// configuration runs it as that user.
func TestArchiveUnpacksToARootFilesystem(t *testing.T) {
	dir := t.TempDir()
	archive, _ := testArchive(t, dir)
	idx, desc, err := ociarchive.Open(archive, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Annotations["org.opencontainers.image.ref.name"] != "v0.3.0" {
		t.Errorf("index.json annotations %v, want the tag v0.3.0", desc.Annotations)
	}
	for _, bin := range fakeBinaries() {
		rootfs := filepath.Join(dir, bin.Platform.Architecture)
		cfg, err := ociarchive.RootFS(idx, bin.Platform, rootfs)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/gantry-hub" {
			t.Errorf("%s: config runs %v as %q, want /gantry-hub as 65532:65532", bin.Platform, cfg.Config.Entrypoint, cfg.Config.User)
		}
		st, err := os.Stat(filepath.Join(rootfs, "gantry-hub"))
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(filepath.Join(rootfs, "gantry-hub")); !bytes.Equal(data, bin.Data) || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: /gantry-hub is %q with mode %v, want the binary, executable", bin.Platform, data, st.Mode())
		}
	}
	if _, err := ociarchive.RootFS(idx, v1.Platform{OS: "linux", Architecture: "s390x"}, t.TempDir()); err == nil {
		t.Error("a platform the index does not hold gave a file system")
	}
}
