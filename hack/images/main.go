// Command images builds the OCI images of gantry-hub, gantry-agent and kubectl-gantry for linux/amd64 and linux/arm64
// without a container engine, and pushes them. Run from the repository root:
//
//	go run ./hack/images                       # writes bin/images/<binary>.tar for each binary
//	go run ./hack/images -push registry.example/gantry
//
// Each image is one layer that this program writes itself: the static binary at /<name> and an /etc/passwd
// and /etc/group with the user and group nonroot (65532); no shell, no base image. Equal commits give
// byte-equal archives: every time in them is the commit's.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/gantry-dev/gantry/internal/ociarchive"
)

const (
	module     = "github.com/gantry-dev/gantry"
	sourceURL  = "https://" + module
	versionPkg = module + "/internal/version"
)

var (
	binaries  = []string{"gantry-hub", "gantry-agent", "kubectl-gantry"}
	platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}
)

func main() {
	out := flag.String("out", "bin/images", "Directory of the image archives, <name>.tar each.")
	repo := flag.String("repo", "ghcr.io/gantry-dev", "Repository prefix the archives name their images under, as kind load shows them.")
	push := flag.String("push", "", "Push the archives in -out to this registry prefix (e.g. registry.example/gantry) instead of building them.")
	flag.Parse()
	var err error
	if *push != "" {
		err = pushAll(*out, *push)
	} else {
		err = buildAll(*out, *repo)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

// gitSource reads version, commit and commit time from the checkout; VERSION overrides git describe.
func gitSource() (Source, error) {
	git := func(args ...string) (string, error) {
		b, err := exec.Command("git", args...).Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	src := Source{URL: sourceURL, Version: os.Getenv("VERSION")}
	var err error
	if src.Commit, err = git("rev-parse", "HEAD"); err != nil {
		return src, err
	}
	if src.Version == "" {
		if src.Version, err = git("describe", "--tags", "--always", "--dirty"); err != nil {
			return src, err
		}
	}
	ct, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return src, err
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return src, fmt.Errorf("commit time %q: %w", ct, err)
	}
	src.Created = time.Unix(secs, 0).UTC()
	return src, nil
}

// goBuild cross-compiles ./cmd/<binary> as a static, reproducible executable and returns its bytes.
func goBuild(binary string, p v1.Platform, src Source, tmp string) ([]byte, error) {
	outPath := filepath.Join(tmp, binary+"-"+p.OS+"-"+p.Architecture)
	ldflags := fmt.Sprintf("-s -w -buildid= -X %s.Version=%s -X %s.Commit=%s", versionPkg, src.Version, versionPkg, src.Commit)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", outPath, "./cmd/"+binary)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building %s for %s: %w", binary, p, err)
	}
	return os.ReadFile(outPath)
}

func buildAll(out, repo string) error {
	src, err := gitSource()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gantry-images-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, binary := range binaries {
		var bins []Binary
		for _, p := range platforms {
			data, err := goBuild(binary, p, src, tmp)
			if err != nil {
				return err
			}
			bins = append(bins, Binary{Platform: p, Data: data})
		}
		if err := writeImage(filepath.Join(out, binary+".tar"), binary, repo+"/"+binary+":"+src.Version, src, bins); err != nil {
			return err
		}
	}
	return nil
}

func writeImage(path, binary, ref string, src Source, bins []Binary) error {
	idx, err := Index(binary, src, bins)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeArchive(f, idx, ref, src.Version, src.Created); err != nil {
		_ = f.Close() // the write failed already
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s %d bytes\n", path, ref, d, st.Size())
	return nil
}

// pushAll pushes each archive's index to <registry>/<name>:<tag>, the tag being the one the archive was
// built with; credentials come from the Docker config (~/.docker/config.json), as for crane.
func pushAll(out, registry string) error {
	for _, binary := range binaries {
		dir, err := os.MkdirTemp("", "gantry-push-")
		if err != nil {
			return err
		}
		err = pushArchive(filepath.Join(out, binary+".tar"), dir, registry+"/"+binary)
		_ = os.RemoveAll(dir) // a temporary copy of the archive
		if err != nil {
			return err
		}
	}
	return nil
}

func pushArchive(archive, dir, repository string) error {
	idx, desc, err := ociarchive.Open(archive, dir)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(repository + ":" + desc.Annotations["org.opencontainers.image.ref.name"])
	if err != nil {
		return err
	}
	if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	fmt.Printf("%s@%s\n", ref, desc.Digest)
	return nil
}
