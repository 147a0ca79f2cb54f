package main

import (
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// make push pushes an archive to a registry (go-containerregistry's, in memory, on loopback): the index
// arrives under the archive's tag with its digest, both platforms' images with it.
func TestPushArchiveToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	dir := t.TempDir()
	archive, idx := testArchive(t, dir)
	if err := pushArchive(archive, filepath.Join(dir, "layout"), host+"/gantry/gantry-hub"); err != nil {
		t.Fatal(err)
	}

	ref, err := name.ParseReference(host+"/gantry/gantry-hub:v0.3.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pulling %s back: %v", ref, err)
	}
	got, _ := pulled.Digest()
	want, _ := idx.Digest()
	if got != want {
		t.Errorf("the registry holds %s, the archive %s", got, want)
	}
	im, err := pulled.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range im.Manifests {
		img, err := pulled.Image(desc.Digest)
		if err != nil {
			t.Fatalf("%s: %v", desc.Platform, err)
		}
		if _, err := img.Layers(); err != nil {
			t.Errorf("%s: %v", desc.Platform, err)
		}
	}
	if len(im.Manifests) != 2 {
		t.Errorf("%d images in the pushed index, want 2", len(im.Manifests))
	}
}
