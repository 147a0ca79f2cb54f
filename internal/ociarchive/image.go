package ociarchive

import (
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Open unpacks the archive at path into dir and returns the one image index it holds, with the
// descriptor index.json gives it (its annotations name the image and its tag).
func Open(path, dir string) (v1.ImageIndex, v1.Descriptor, error) {
	if err := UnpackFile(path, dir); err != nil {
		return nil, v1.Descriptor{}, err
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, v1.Descriptor{}, fmt.Errorf("reading %s: %w", path, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	if len(im.Manifests) != 1 {
		return nil, v1.Descriptor{}, fmt.Errorf("%s holds %d entries, want one image index", path, len(im.Manifests))
	}
	desc := im.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, v1.Descriptor{}, err
	}
	return idx, desc, nil
}

// RootFS writes the file system of idx's image for platform into dir, its layers applied in order,
// and returns the image's configuration.
func RootFS(idx v1.ImageIndex, platform v1.Platform, dir string) (*v1.ConfigFile, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		if desc.Platform == nil || !desc.Platform.Satisfies(platform) {
			continue
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		fs := mutate.Extract(img)
		defer fs.Close()
		if err := Unpack(fs, dir); err != nil {
			return nil, fmt.Errorf("the file system of %s: %w", platform, err)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("no image for %s", platform)
}
