// Package ociarchive reads what hack/images writes: an OCI image layout in a tar, and the one-layer
// root filesystems of its images.
package ociarchive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Unpack extracts a tar of directories and regular files into dir, keeping their permission bits and
// refusing any entry that would land outside dir or is of another type (links, devices): neither an
// image layout nor the layers hack/images writes hold one.
func Unpack(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(hdr.Name) {
			return fmt.Errorf("entry %q leaves the archive", hdr.Name)
		}
		target := filepath.Join(dir, hdr.Name)
		perm := os.FileMode(hdr.Mode) & os.ModePerm
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, perm|0o700)
		case tar.TypeReg:
			err = writeFile(target, tr, perm)
		default:
			err = fmt.Errorf("entry %q is neither a file nor a directory", hdr.Name)
		}
		if err != nil {
			return err
		}
	}
}

// UnpackFile extracts the tar at path into dir, as Unpack does.
func UnpackFile(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := Unpack(f, dir); err != nil {
		return fmt.Errorf("unpacking %s: %w", path, err)
	}
	return nil
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close() // the copy failed already
		return err
	}
	return f.Close()
}
