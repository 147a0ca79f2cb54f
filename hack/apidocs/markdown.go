package main

import (
	"strings"
)

// oneLine joins a description's lines and runs of spaces into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// escaper keeps text from being read as Markdown or HTML: emphasis, tags and backslashes.
var escaper = strings.NewReplacer(`\`, `\\`, `*`, `\*`, `_`, `\_`, `<`, `\<`, `>`, `\>`)

// escape makes text print as it is. Backquoted parts stay code.
func escape(s string) string {
	return escaper.Replace(s)
}

// cell makes Markdown fit a table cell: a pipe would end the cell, in code spans too.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// code is s as a code span, fenced by more backquotes than it holds in a row.
func code(s string) string {
	if s == "" {
		return ""
	}
	longest, run := 0, 0
	for _, r := range s {
		if r != '`' {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 || strings.HasPrefix(s, " ") && strings.HasSuffix(s, " ") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// codeList is names as code spans, separated by commas.
func codeList(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = code(n)
	}
	return strings.Join(out, ", ")
}
