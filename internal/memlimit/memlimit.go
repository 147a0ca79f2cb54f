// Package memlimit sets the Go runtime's soft memory limit from the memory limit of the container a
// Gantry component runs in. Without it the heap of a hub holding a deep queue may grow to twice what it
// keeps alive before a collection, and the container is killed at its limit while half its memory is
// garbage; with it the collector works harder as the process nears the limit instead.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// Share is the part of the container's memory limit the Go heap and runtime may use; the rest is left
// for what the runtime does not count (thread stacks the kernel holds, mapped files).
const Share = 0.9

// cgroupRoot is where the process's cgroup is mounted in a container.
const cgroupRoot = "/sys/fs/cgroup"

// Apply sets the soft memory limit to Share of the container's memory limit, unless GOMEMLIMIT is set
// (the operator's choice stands) or no limit applies. It returns the limit it set, 0 when it set none.
func Apply() (int64, error) {
	return apply(os.Getenv("GOMEMLIMIT"), os.DirFS(cgroupRoot), debug.SetMemoryLimit)
}

func apply(env string, cgroup fs.FS, set func(int64) int64) (int64, error) {
	if env != "" {
		return 0, nil
	}
	limit, err := containerLimit(cgroup)
	if err != nil || limit == 0 {
		return 0, err
	}
	soft := int64(float64(limit) * Share)
	set(soft)
	return soft, nil
}

// unlimitedV1 is the least value cgroup v1 reports for "no limit" (the largest page-aligned int64).
const unlimitedV1 = 1 << 62

// containerLimit reads the memory limit of the cgroup: cgroup v2's memory.max, else cgroup v1's
// memory/memory.limit_in_bytes. 0 means none: no such file, or no limit set.
func containerLimit(cgroup fs.FS) (int64, error) {
	for _, file := range []string{"memory.max", path.Join("memory", "memory.limit_in_bytes")} {
		data, err := fs.ReadFile(cgroup, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading the cgroup's %s: %w", file, err)
		}
		value := strings.TrimSpace(string(data))
		if value == "max" {
			return 0, nil
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("the cgroup's %s holds %q, not a number of bytes", file, value)
		}
		if n >= unlimitedV1 {
			return 0, nil
		}
		return n, nil
	}
	return 0, nil
}

// Setup applies the limit and logs what it set, or why it set none.
func Setup(log logr.Logger) {
	switch limit, err := Apply(); {
	case err != nil:
		log.Error(err, "Reading the container's memory limit; the Go heap has no soft limit")
	case limit > 0:
		log.Info("Soft memory limit from the container's", "bytes", limit, "share", Share)
	}
}
