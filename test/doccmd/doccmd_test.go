package doccmd

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// Every block of commands in the docs runs on the testbed, or says why not, or names the test that runs
// its equivalent; manifests are applied only where they say so; every doc with blocks is in Order.
func TestEveryCommandInTheDocsIsRunOrSaysWhyNot(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := testNames(t)
	run := 0
	for _, path := range append(docs, filepath.Join(root, "README.md")) {
		rel, _ := filepath.Rel(root, path)
		blocks, err := Read(path)
		if err != nil {
			t.Fatal(err)
		}
		commands := 0
		for _, b := range blocks {
			switch {
			case (b.Marker.Kind == "apply" || b.Marker.Kind == "dry-run") && !b.IsObjects():
				t.Errorf("%s: only a yaml block of objects is applied, not this %q block", b.Where(), b.Lang)
			case b.IsObjects() && b.Marker.Kind != "apply" && b.Marker.Kind != "dry-run" && b.Marker.Kind != "skip":
				t.Errorf("%s: a yaml block of objects says whether the testbed applies it (apply, dry-run or skip: REASON)", b.Where())
			case b.Marker.Kind == "skip" && !b.IsCommand() && !b.IsObjects(), b.Marker.Kind == "covered" && !b.IsCommand():
				t.Errorf("%s: a %q block is not run anyway; leave the marker out", b.Where(), b.Lang)
			case b.Marker.Kind == "covered" && !tests[b.Marker.Arg]:
				t.Errorf("%s: no test %s", b.Where(), b.Marker.Arg)
			case b.IsCommand() && strings.TrimSpace(b.Script()) == "":
				t.Errorf("%s: a %s block with no command", b.Where(), b.Lang)
			}
			if b.IsCommand() || b.IsObjects() {
				commands++
			}
			if (b.IsCommand() && b.Marker.Kind == "") || b.Marker.Kind == "apply" || b.Marker.Kind == "dry-run" {
				run++
			}
		}
		if commands > 0 && !slices.Contains(Order, filepath.ToSlash(rel)) {
			t.Errorf("%s has commands but is not in Order", rel)
		}
	}
	t.Logf("%d blocks of commands and objects run on the testbed", run)
}

func TestMarkers(t *testing.T) {
	for line, want := range map[string]Marker{
		"<!-- testbed: apply -->":                        {Kind: "apply"},
		"<!-- testbed: skip: needs a registry -->":       {Kind: "skip", Arg: "needs a registry"},
		"<!-- testbed: covered by TestTheChartWorks -->": {Kind: "covered", Arg: "TestTheChartWorks"},
		"Some text.": {},
	} {
		if got, err := markerOf(line); err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"<!-- testbed: skip: -->", "<!-- testbed: run -->", "<!-- testbed: skip: no end"} {
		if _, err := markerOf(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConsoleBlocksRunTheirPromptedLines(t *testing.T) {
	b := Block{Lang: "console", Text: "$ kubectl gantry jobs\nNAME  STATE\ntrain Running\n$ kubectl gantry queues"}
	if got := b.Script(); got != "kubectl gantry jobs\nkubectl gantry queues" {
		t.Errorf("script %q", got)
	}
}

// testNames are the names of the repository's tests.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == ".dev") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}
