package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, seen from this package.
const root = "../.."

// TestDocLinksResolve checks every relative link of README.md and docs/*.md: the file or directory it
// names exists, and an #anchor names a heading of the page it points to (or an <a id>/<a name> there).
// Links in code blocks and code spans are not links; links with a scheme (https:, mailto:) are not
// checked.
func TestDocLinksResolve(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		data, err := os.ReadFile(page)
		if err != nil {
			return nil, err
		}
		anchors[page] = Anchors(string(data))
		return anchors[page], nil
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range Links(string(data)) {
			if err := checkLink(page, l, anchorsOf); err != nil {
				t.Errorf("%s:%d: link %s: %v", rel(page), l.Line, l.Target, err)
			}
		}
	}
}

func checkLink(page string, l Link, anchorsOf func(string) (map[string]bool, error)) error {
	path, anchor, _ := strings.Cut(l.Target, "#")
	target := page
	if path != "" {
		target = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
		if _, err := os.Stat(target); err != nil {
			return fmt.Errorf("no such file or directory %s", rel(target))
		}
	}
	if anchor == "" {
		return nil
	}
	if !strings.HasSuffix(target, ".md") {
		return fmt.Errorf("an anchor into %s, which is not a Markdown page", rel(target))
	}
	a, err := anchorsOf(target)
	if err != nil {
		return err
	}
	if !a[anchor] {
		return fmt.Errorf("%s has no heading whose anchor is #%s", rel(target), anchor)
	}
	return nil
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// Link is a link's target, as written, and the line it is on.
type Link struct {
	Target string
	Line   int
}

var (
	inlineLink    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	referenceLink = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	scheme        = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	fence         = regexp.MustCompile("^\\s{0,3}(```+|~~~+)")
	htmlAnchor    = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	atxHeading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
)

// Links lists the relative links of a Markdown page: inline links and images, and reference
// definitions, outside code.
func Links(page string) []Link {
	var out []Link
	for i, line := range proseLines(page) {
		if line == "" {
			continue
		}
		line = withoutCodeSpans(line)
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := referenceLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if t == "" || scheme.MatchString(t) || strings.HasPrefix(t, "//") {
				continue
			}
			out = append(out, Link{Target: t, Line: i + 1})
		}
	}
	return out
}

// withoutCodeSpans removes the code spans of a line: from a run of backquotes to the next run of as many.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := runOf(line, i)
		end := -1
		for j := i + n; j < len(line); {
			if line[j] != '`' {
				j++
				continue
			}
			m := runOf(line, j)
			if m == n {
				end = j + m
				break
			}
			j += m
		}
		if end < 0 {
			b.WriteString(line[i : i+n])
			i += n
			continue
		}
		i = end
	}
	return b.String()
}

func runOf(line string, i int) int {
	n := 0
	for i+n < len(line) && line[i+n] == '`' {
		n++
	}
	return n
}

// proseLines are the page's lines with those of fenced code blocks blanked, so that indexes stay line
// numbers less one.
func proseLines(page string) []string {
	lines := strings.Split(page, "\n")
	open := ""
	for i, line := range lines {
		m := fence.FindStringSubmatch(line)
		switch {
		case open == "" && m != nil:
			open = m[1]
			lines[i] = ""
		case open != "":
			if m != nil && m[1][0] == open[0] && len(m[1]) >= len(open) && strings.TrimSpace(line) == m[1] {
				open = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// Anchors are the anchors of a page's headings as GitHub makes them (lowercase; spaces become hyphens;
// punctuation other than hyphens and underscores is dropped; a repeated one gets -1, -2, ...) and the
// ids of its <a id> and <a name> tags.
func Anchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(page) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := Slug(m[2])
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var (
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

// Slug is the anchor GitHub gives a heading's text.
func Slug(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"The hub's cost, by design":                     "the-hubs-cost-by-design",
		"Preemption: take back what runs":               "preemption-take-back-what-runs",
		"`kubectl gantry explain`":                      "kubectl-gantry-explain",
		"Wait and Fence: what happens to a lost worker": "wait-and-fence-what-happens-to-a-lost-worker",
		"Deadlines: give up, with a reason":             "deadlines-give-up-with-a-reason",
		"[Links](x.md) and <b>tags</b> in a heading":    "links-and-tags-in-a-heading",
		"GantryHubDown, GantryAgentDown":                "gantryhubdown-gantryagentdown",
		"snake_case stays":                              "snake_case-stays",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestLinksAndAnchorsOfAPage(t *testing.T) {
	page := "# Title\n\nSee [a](other.md#part), ![img](img.png \"t\") and [web](https://example.com).\n" +
		"`[not](a-link.md)` in code\n\n```sh\n[nor](this.md)\n```\n\n[ref]: ref.md#x\n\n## Title\n\n<a id=\"here\"></a>\n"
	var got []string
	for _, l := range Links(page) {
		got = append(got, fmt.Sprintf("%d:%s", l.Line, l.Target))
	}
	want := []string{"3:other.md#part", "3:img.png", "10:ref.md#x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Links = %v, want %v", got, want)
	}
	a := Anchors(page)
	for _, want := range []string{"title", "title-1", "here"} {
		if !a[want] {
			t.Errorf("Anchors lacks %q: %v", want, a)
		}
	}
}

// TestEveryAlertHasARunbook checks that docs/operating.md has a section for each alert of the chart's
// PrometheusRule, whose anchor is the alert's name in lower case.
func TestEveryAlertHasARunbook(t *testing.T) {
	rule, err := os.ReadFile(filepath.Join(root, "deploy", "charts", "gantry", "templates", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := Anchors(string(page))
	alerts := regexp.MustCompile(`(?m)alert:\s*(.+?)\s*$`).FindAllStringSubmatch(string(rule), -1)
	if len(alerts) == 0 {
		t.Fatal("no alerts found in the chart's PrometheusRule")
	}
	for _, m := range alerts {
		names := []string{m[1]}
		if strings.Contains(m[1], "{{") { // Gantry{{ $title }}Down: one alert per program
			names = nil
			for _, title := range []string{"Hub", "Agent"} {
				names = append(names, regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(m[1], title))
			}
		}
		for _, name := range names {
			if !anchors[strings.ToLower(name)] {
				t.Errorf("docs/operating.md has no runbook section %q for the alert %s", "### "+name, name)
			}
		}
	}
}
