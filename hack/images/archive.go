package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...) in a tar, the format of
// `docker save` since Docker 25 without its manifest.json. `kind load image-archive` takes it: kind runs
// `ctr images import --all-platforms`, which names the image after the io.containerd.image.name
// annotation of index.json. crane push reads a tar only as a single-platform docker tarball
// (go-containerregistry's tarball package, which cannot hold an index) and an OCI layout only as a
// directory, so it takes this archive unpacked: `tar -xf gantry-hub.tar -C dir && crane push dir REF`.
// go-containerregistry's layout package writes only directories; writeArchive tars the same layout in a
// fixed order with fixed times, so that equal indexes give byte-equal archives.

// blobs returns every blob of idx (its manifest, each image's manifest, config and layers) by digest.
func blobs(idx v1.ImageIndex) (map[v1.Hash][]byte, error) {
	out := map[v1.Hash][]byte{}
	raw, err := idx.RawManifest()
	if err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	out[d] = raw
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		if err := imageBlobs(img, out); err != nil {
			return nil, fmt.Errorf("reading image %s: %w", desc.Digest, err)
		}
	}
	return out, nil
}

func imageBlobs(img v1.Image, out map[v1.Hash][]byte) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	out[d] = raw
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	if out[cfgName], err = img.RawConfigFile(); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		ld, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		out[ld] = data
	}
	return nil
}

// writeArchive writes idx as an OCI layout tar whose index.json names it ref (e.g.
// ghcr.io/gantry-dev/gantry-hub:v0.3.0); every entry is owned by 0:0 and modified at mtime.
func writeArchive(w io.Writer, idx v1.ImageIndex, ref, tag string, mtime time.Time) error {
	all, err := blobs(idx)
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	top, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex,
		Manifests: []v1.Descriptor{{MediaType: types.OCIImageIndex, Digest: d, Size: int64(len(all[d])),
			Annotations: map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": tag}}}})
	if err != nil {
		return err
	}
	files := map[string][]byte{"index.json": top, "oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)}
	for h, data := range all {
		files["blobs/"+h.Algorithm+"/"+h.Hex] = data
	}
	return writeTar(w, files, mtime)
}

// writeTar writes files and their parent directories in name order.
func writeTar(w io.Writer, files map[string][]byte, mtime time.Time) error {
	names := []string{}
	dirs := map[string]bool{}
	for name := range files {
		names = append(names, name)
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if !dirs[dir+"/"] {
				dirs[dir+"/"] = true
				names = append(names, dir+"/")
			}
		}
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, name := range names {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(files[name])), Typeflag: tar.TypeReg,
			ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX}
		if strings.HasSuffix(name, "/") {
			hdr.Mode, hdr.Typeflag = 0o755, tar.TypeDir
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return err
		}
	}
	return tw.Close()
}
