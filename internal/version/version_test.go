package version

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}, true
	}
	devel := func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true }
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	cases := map[string]struct {
		version, commit string
		read            func() (*debug.BuildInfo, bool)
		wantV, wantC    string
	}{
		"set by the linker":     {"v0.3.0", "deadbeef", stamped, "v0.3.0", "deadbeef"},
		"from build info":       {"dev", "unknown", stamped, "v1.2.3", "abc123"},
		"only commit from info": {"v0.3.0", "unknown", stamped, "v0.3.0", "abc123"},
		"devel build":           {"dev", "unknown", devel, "dev", "unknown"},
		"no build info":         {"dev", "unknown", none, "dev", "unknown"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, c := fromBuildInfo(tc.version, tc.commit, tc.read)
			if v != tc.wantV || c != tc.wantC {
				t.Errorf("got %q %q, want %q %q", v, c, tc.wantV, tc.wantC)
			}
		})
	}
}

func TestString(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v0.3.0", "deadbeef"
	if got, want := String("gantry-hub"), "gantry-hub v0.3.0 (deadbeef)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestSkewOf(t *testing.T) {
	for _, c := range []struct {
		hub, agent string
		want       Skew
	}{
		{"v0.3.0", "v0.3.2", SkewSupported},
		{"v0.3.0", "v0.2.9", SkewSupported},
		{"v0.3.0", "v0.4.0-rc.1", SkewSupported},
		{"v0.3.0-5-gabc1234", "v0.2.0", SkewSupported},
		{"v0.3.0", "v0.1.0", SkewUnsupported},
		{"v0.3.0", "v0.5.0", SkewUnsupported},
		{"v1.3.0", "v0.3.0", SkewUnsupported},
		{"v0.10.0", "v0.9.0", SkewSupported},
		{"dev", "v0.3.0", SkewUnknown},
		{"v0.3.0", "", SkewUnknown},
		{"v0.3.0", "abc1234", SkewUnknown},
	} {
		if got := SkewOf(c.hub, c.agent); got != c.want {
			t.Errorf("SkewOf(%q, %q) = %v, want %v", c.hub, c.agent, got, c.want)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(BuildInfo("gantry-hub"))
	got, err := reg.Gather()
	if err != nil || len(got) != 1 || got[0].GetName() != "gantry_build_info" || got[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("gathered %v, %v", got, err)
	}
	labels := map[string]string{}
	for _, l := range got[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["program"] != "gantry-hub" || labels["version"] == "" || labels["goversion"] == "" {
		t.Errorf("labels %v", labels)
	}
}
