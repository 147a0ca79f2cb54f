// Package version holds the version and commit a Gantry binary was built from. The image build sets both
// with -ldflags "-X"; a plain go build falls back to what the Go toolchain stamped into the binary.
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Version and Commit are set at link time:
//
//	-X github.com/gantry-dev/gantry/internal/version.Version=v0.3.0
//	-X github.com/gantry-dev/gantry/internal/version.Commit=<git commit>
var (
	Version = "dev"
	Commit  = "unknown"
)

// Get returns Version and Commit, filled from the binary's build information where the linker did not set
// them: the main module's version (for go install ...@version) and the vcs.revision of a build in a checkout.
func Get() (version, commit string) {
	return fromBuildInfo(Version, Commit, debug.ReadBuildInfo)
}

// String is the line a binary prints for --version: "gantry-hub v0.3.0 (0123abc...)".
func String(binary string) string {
	v, c := Get()
	return fmt.Sprintf("%s %s (%s)", binary, v, c)
}

func fromBuildInfo(version, commit string, read func() (*debug.BuildInfo, bool)) (string, string) {
	if version != "dev" && commit != "unknown" {
		return version, commit
	}
	info, ok := read()
	if !ok {
		return version, commit
	}
	if version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
	for _, s := range info.Settings {
		if commit == "unknown" && s.Key == "vcs.revision" && s.Value != "" {
			commit = s.Value
		}
	}
	return version, commit
}

// releaseVersion reads the major and minor release of a version: v0.3.0, v0.3.1-rc.1, or a build
// after a release as git describe names it (v0.3.0-5-gabc1234) count as 0.3.
var releaseVersion = regexp.MustCompile(`^v(\d+)\.(\d+)\.\d+`)

// Skew is how two versions stand to the version-skew policy (docs/upgrading.md): a hub works with
// agents of its own minor release, the one before and the one after.
type Skew int

const (
	// SkewUnknown: one of them is not a release (a development build, or an agent from before
	// versions were reported).
	SkewUnknown Skew = iota
	SkewSupported
	SkewUnsupported
)

// SkewOf judges the versions of a hub and an agent against the policy.
func SkewOf(hub, agent string) Skew {
	h, a := releaseVersion.FindStringSubmatch(hub), releaseVersion.FindStringSubmatch(agent)
	if h == nil || a == nil {
		return SkewUnknown
	}
	hMinor, _ := strconv.Atoi(h[2])
	aMinor, _ := strconv.Atoi(a[2])
	if h[1] != a[1] || hMinor-aMinor > 1 || aMinor-hMinor > 1 {
		return SkewUnsupported
	}
	return SkewSupported
}

// BuildInfo is the metric gantry_build_info of the program: 1, labelled with the program, its version,
// commit and Go version, so that a fleet's dashboards show what runs where during an upgrade.
func BuildInfo(program string) prometheus.Collector {
	v, c := Get()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "gantry_build_info",
		Help:        "1, labelled with the program's version, commit and Go version.",
		ConstLabels: prometheus.Labels{"program": program, "version": v, "commit": c, "goversion": runtime.Version()},
	}, func() float64 { return 1 })
}
