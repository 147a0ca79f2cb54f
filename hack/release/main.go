// Command release makes a release of Gantry from the commit checked out (make release):
//
//	go run ./hack/release -version v0.3.0 [-registry registry.example/gantry]
//
// It writes, into bin/release/<version>/:
//   - images/gantry-hub.tar, gantry-agent.tar, kubectl-gantry.tar: the images, tagged <version> (hack/images);
//   - gantry-<X.Y.Z>.tgz: the chart, its version X.Y.Z and its appVersion <version>, which is the default
//     image tag, so that it installs these images with no --set image.tag;
//   - install-hub.yaml and install-worker.yaml: one manifest per role rendered from that chart, CRDs
//     first (a worker's agent reads its cluster name from a ConfigMap made apart, as with the overlays);
//   - RELEASE-NOTES.md: the version's section of CHANGELOG.md;
//   - SHA256SUMS of all of them.
//
// With -registry the images go to <registry>/<binary>:<version> and the chart to
// oci://<registry>/gantry:<X.Y.Z>, and the chart's default image registry is <registry>. The tree must be
// clean and CHANGELOG.md must have the version's section; the tag <version> is made on the commit when
// it is not there (a tag on another commit is an error). -untagged tries a release: no tag, and the tree
// as it is.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gantry-dev/gantry/internal/helmchart"
)

func main() {
	o := options{}
	flag.StringVar(&o.version, "version", "", "The release's version, v<major>.<minor>.<patch>; required.")
	flag.StringVar(&o.registry, "registry", "", "Push the images and the chart to this registry prefix (registry.example/gantry); the chart pulls its images from there.")
	flag.StringVar(&o.out, "out", "bin/release", "Directory under which <version>/ is written.")
	flag.StringVar(&o.chart, "chart", "deploy/charts/gantry", "The chart's directory.")
	flag.StringVar(&o.changelog, "changelog", "CHANGELOG.md", "The changelog the release notes are taken from.")
	flag.BoolVar(&o.untagged, "untagged", false, "Try the release: make it from the tree as it is, uncommitted changes too, and make no tag.")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

type options struct {
	version, registry, out, chart, changelog string
	untagged                                 bool
}

func run(o options) error {
	chartVersion, err := chartVersionOf(o.version)
	if err != nil {
		return err
	}
	changelog, err := os.ReadFile(o.changelog)
	if err != nil {
		return err
	}
	notes, err := releaseNotes(string(changelog), o.version)
	if err != nil {
		return err
	}
	if !o.untagged {
		if err := tagCommit(o.version); err != nil {
			return err
		}
	}
	dir := filepath.Join(o.out, o.version)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "RELEASE-NOTES.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	if err := buildImages(o.version, dir, o.registry); err != nil {
		return err
	}
	ch, err := helmchart.Load(o.chart)
	if err != nil {
		return err
	}
	if err := stampChart(ch, chartVersion, o.version, o.registry); err != nil {
		return err
	}
	if err := writeChartAndManifests(ch, dir); err != nil {
		return err
	}
	if o.registry != "" {
		if err := pushAll(dir, ch, o.registry); err != nil {
			return err
		}
	}
	return writeSums(dir)
}

// tagCommit makes the tag version on HEAD, after checking that the tree is clean: a release is one
// commit. A tag already on HEAD is kept; one on another commit is an error.
func tagCommit(version string) error {
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return err
	}
	if status != "" {
		return fmt.Errorf("the tree has uncommitted changes; a release is made from a commit:\n%s", status)
	}
	head, err := git("rev-parse", "HEAD")
	if err != nil {
		return err
	}
	tagged, err := git("rev-parse", "--verify", "--quiet", version+"^{commit}")
	switch {
	case err == nil && tagged == head:
		return nil
	case err == nil:
		return fmt.Errorf("the tag %s is on %s, not on HEAD (%s)", version, tagged, head)
	}
	_, err = git("tag", version, head)
	return err
}

func git(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// buildImages builds the images tagged version into dir/images with hack/images, the one home of the
// image build, and pushes them when registry is set.
func buildImages(version, dir, registry string) error {
	images := filepath.Join(dir, "images")
	if err := goRun(version, "./hack/images", "-out", images); err != nil {
		return err
	}
	if registry == "" {
		return nil
	}
	return goRun(version, "./hack/images", "-out", images, "-push", registry)
}

func goRun(version string, args ...string) error {
	cmd := exec.Command("go", append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), "VERSION="+version)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go run %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
