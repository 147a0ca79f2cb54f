package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonroot is the user and group the binaries run as, the one distroless images call nonroot.
const nonroot = "65532"

const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n"
	group  = "root:x:0:\nnonroot:x:65532:\n"
)

// Source is what an image is built from, besides its binaries; equal Sources and binaries give equal digests.
type Source struct {
	Version string    // org.opencontainers.image.version
	Commit  string    // org.opencontainers.image.revision
	URL     string    // org.opencontainers.image.source
	Created time.Time // the commit's time: image creation time and every file's mtime
}

// Binary is one static executable built for one platform.
type Binary struct {
	Platform v1.Platform
	Data     []byte
}

// annotations are the OCI annotations of the index and its manifests, and the labels of each config.
func (s Source) annotations() map[string]string {
	return map[string]string{
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Commit,
		"org.opencontainers.image.source":   s.URL,
		"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
	}
}

// Index assembles the multi-platform image of the binary called name: one image per platform, each of one
// layer holding /<name>, /etc/passwd and /etc/group, all in one OCI image index.
func Index(name string, src Source, bins []Binary) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		img, err := platformImage(name, src, b)
		if err != nil {
			return nil, fmt.Errorf("assembling %s for %s: %w", name, b.Platform, err)
		}
		p := b.Platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.Annotations(idx, src.annotations()).(v1.ImageIndex), nil
}

func platformImage(name string, src Source, b Binary) (v1.Image, error) {
	layerTar, err := rootfs(name, b.Data, src.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: src.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: b.Platform.Architecture,
		OS:           b.Platform.OS,
		Variant:      b.Platform.Variant,
		Created:      created,
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       nonroot + ":" + nonroot,
			Entrypoint: []string{"/" + name},
			WorkingDir: "/",
			Labels:     src.annotations(),
		},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer,
		History: v1.History{Created: created, CreatedBy: "hack/images: /" + name + ", /etc/passwd, /etc/group"}})
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, src.annotations()).(v1.Image), nil
}

// rootfs is the image's only layer, an uncompressed tar in name order, every entry owned by 0:0 and
// modified at mtime.
func rootfs(name string, binary []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte(group)},
		{"etc/passwd", 0o644, []byte(passwd)},
		{name, 0o755, binary},
	}
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: mtime.UTC().Truncate(time.Second),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if e.data == nil {
			hdr.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
