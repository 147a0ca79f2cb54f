// Package doccmd finds the commands and manifests in Gantry's docs, so that tests run them as a reader
// would. A fenced block of sh, bash or console (whose commands are the lines after "$ ") is a command
// block, run on the testbed unless the line before its fence says otherwise:
//
//	<!-- testbed: skip: why it cannot run there -->
//	<!-- testbed: covered by TestName -->   (a test runs its equivalent)
//
// A yaml block of objects (one that starts with apiVersion) says what the testbed does with it:
//
//	<!-- testbed: apply -->      applied to the hub before the commands after it
//	<!-- testbed: dry-run -->    applied server-side in a dry run: the API server must take it
//	<!-- testbed: skip: why -->
package doccmd

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Block is one fenced block of a doc.
type Block struct {
	File string
	// Line is the fence's, from 1.
	Line int
	Lang string
	Text string
	// Marker is what the line before the fence says of the block; its zero value says nothing.
	Marker Marker
}

// Marker is a <!-- testbed: ... --> comment: Kind is "skip", "covered", "apply", "dry-run" or "" (none),
// Arg the reason or the test's name.
type Marker struct{ Kind, Arg string }

// Where names the block as file:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// IsObjects says whether the block is YAML of Kubernetes objects.
func (b Block) IsObjects() bool { return b.Lang == "yaml" && strings.HasPrefix(b.Text, "apiVersion:") }

// IsCommand says whether the block holds commands.
func (b Block) IsCommand() bool { return b.Lang == "sh" || b.Lang == "bash" || b.Lang == "console" }

// Script is the block's commands as a shell script: a console block's lines after "$ ".
func (b Block) Script() string {
	if b.Lang != "console" {
		return b.Text
	}
	var lines []string
	for _, l := range strings.Split(b.Text, "\n") {
		if cmd, ok := strings.CutPrefix(l, "$ "); ok {
			lines = append(lines, cmd)
		}
	}
	return strings.Join(lines, "\n")
}

// Read returns the fenced blocks of a Markdown file, in order.
func Read(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []Block
	var open *Block
	var body []string
	previous := ""
	lines := bufio.NewScanner(f)
	for n := 1; lines.Scan(); n++ {
		line := lines.Text()
		switch {
		case open == nil && strings.HasPrefix(line, "```"):
			marker, err := markerOf(previous)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n-1, err)
			}
			open, body = &Block{File: path, Line: n, Lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), Marker: marker}, nil
		case open != nil && strings.HasPrefix(line, "```"):
			open.Text = strings.Join(body, "\n")
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			body = append(body, line)
		}
		previous = line
	}
	if open != nil {
		return nil, fmt.Errorf("%s:%d: the block is never closed", path, open.Line)
	}
	return blocks, lines.Err()
}

// markerOf reads a <!-- testbed: ... --> line; any other line is no marker.
func markerOf(line string) (Marker, error) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(line), "<!-- testbed:")
	if !ok {
		return Marker{}, nil
	}
	inner, ok = strings.CutSuffix(inner, "-->")
	if !ok {
		return Marker{}, fmt.Errorf("a testbed marker must be one line: %q", line)
	}
	inner = strings.TrimSpace(inner)
	switch {
	case inner == "apply" || inner == "dry-run":
		return Marker{Kind: inner}, nil
	case strings.HasPrefix(inner, "skip:") && strings.TrimSpace(strings.TrimPrefix(inner, "skip:")) != "":
		return Marker{Kind: "skip", Arg: strings.TrimSpace(strings.TrimPrefix(inner, "skip:"))}, nil
	case strings.HasPrefix(inner, "covered by Test"):
		return Marker{Kind: "covered", Arg: strings.TrimSpace(strings.TrimPrefix(inner, "covered by"))}, nil
	}
	return Marker{}, fmt.Errorf("unknown testbed marker %q: want apply, dry-run, skip: REASON or covered by TestName", inner)
}

// Order is the docs in the order a newcomer reads them, which is the order the testbed runs their
// blocks in: a later doc may use what an earlier one made (the queue of install.md, the job of jobs.md).
var Order = []string{
	"README.md", "docs/install.md", "docs/jobs.md", "docs/waiting.md", "docs/cli.md", "docs/sharing.md",
	"docs/usage.md", "docs/failover.md", "docs/troubleshooting.md", "docs/operating.md", "docs/upgrading.md",
	"docs/kueue.md", "docs/ocm.md", "docs/security.md", "docs/concepts.md", "docs/development.md",
}
