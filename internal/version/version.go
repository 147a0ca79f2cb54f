// Package version holds the version and commit a Gantry binary was built from. The image build sets both
// with -ldflags "-X"; a plain go build falls back to what the Go toolchain stamped into the binary.
package version

import (
	"fmt"
	"runtime/debug"
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
