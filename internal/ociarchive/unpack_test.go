package ociarchive

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name     string
	typeflag byte
	mode     int64
	data     string
}

func tarOf(t *testing.T, entries ...entry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typeflag, Mode: e.mode, Size: int64(len(e.data)), Linkname: "/etc/shadow"}
		if e.typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

func TestUnpackKeepsPermissionsAndRefusesWhatLeavesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	err := Unpack(tarOf(t, entry{"etc/", tar.TypeDir, 0o755, ""}, entry{"etc/passwd", tar.TypeReg, 0o644, "nonroot"},
		entry{"bin/tool", tar.TypeReg, 0o755, "ELF"}), dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{"etc/passwd": 0o644, "bin/tool": 0o755} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", name, st, err, want)
		}
	}
	refused := map[string]entry{
		"a path out of the directory": {"../escape", tar.TypeReg, 0o644, "x"},
		"an absolute path":            {"/etc/escape", tar.TypeReg, 0o644, "x"},
		"a symbolic link":             {"link", tar.TypeSymlink, 0o777, ""},
	}
	for name, e := range refused {
		err := Unpack(tarOf(t, e), dir)
		if err == nil || !strings.Contains(err.Error(), e.name) {
			t.Errorf("%s: %v, want an error naming %q", name, err, e.name)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape")); err == nil {
		t.Error("an entry was written outside the directory")
	}
}
