// Command krew builds the release archives of kubectl-gantry and the krew plugin manifest that installs
// them. Run from the repository root:
//
//	go run ./hack/krew -version v0.2.0 -url https://example.org/gantry/releases/v0.2.0
//
// It writes, into -out, kubectl-gantry_<os>_<arch>.tar.gz for each platform (the static binary and the
// kubectl_complete-gantry script kubectl runs for shell completion) and gantry.yaml, whose entries
// point at <url>/<archive> with the archive's sha256.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// platforms are the ones kubectl-gantry is released for.
var platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func main() {
	version := flag.String("version", "", "Version of the release (a v-prefixed semantic version), required.")
	url := flag.String("url", "", "URL the archives are downloaded from, without the archive name; required.")
	out := flag.String("out", "bin/krew", "Directory of the archives and the manifest.")
	flag.Parse()
	if err := run(*version, *url, *out); err != nil {
		fmt.Fprintf(os.Stderr, "krew: %v\n", err)
		os.Exit(1)
	}
}

func run(version, url, out string) error {
	if version == "" || url == "" {
		return fmt.Errorf("-version and -url are required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	completion, err := os.ReadFile(filepath.Join("cmd", "kubectl-gantry", "kubectl_complete-gantry"))
	if err != nil {
		return err
	}
	var archives []Archive
	for _, p := range platforms {
		bin := filepath.Join(out, "kubectl-gantry_"+p.OS+"_"+p.Arch)
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/kubectl-gantry")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building kubectl-gantry for %s/%s: %w", p.OS, p.Arch, err)
		}
		binary, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		a, err := WriteArchive(out, p, binary, completion)
		if err != nil {
			return err
		}
		archives = append(archives, a)
		_ = os.Remove(bin)
	}
	manifest, err := Manifest(version, url, archives)
	if err != nil {
		return err
	}
	path := filepath.Join(out, "gantry.yaml")
	fmt.Println("wrote", path)
	return os.WriteFile(path, manifest, 0o644)
}
