package geofence_test

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The repository's Markdown, checked like the architecture beside it: every
// relative link and #anchor resolves, the current pages cite no internal
// tracker, and the README keeps the commands CI and a first-time reader rely
// on.

// docsRoot is the repository's root.
func docsRoot(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..")
}

// markdownFiles lists the repository's own .md files (vendored ones aside).
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "testdata" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found only %d Markdown files: %v", len(files), files)
	}
	return files
}

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeRE    = regexp.MustCompile("`[^`]*`")
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
)

// prose is text's lines with fenced code blocks blanked and inline code
// removed (line numbers kept).
func prose(text string) []string {
	var lines []string
	fenced := false
	for line := range strings.SplitSeq(text, "\n") {
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		if fence {
			fenced = !fenced
		}
		if fence || fenced {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, codeRE.ReplaceAllString(line, ""))
	}
	return lines
}

// anchors are the fragment ids GitHub gives text's headings.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		m := headingRE.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		id := slug(m[1])
		if n := seen[id]; n > 0 {
			ids[id+"-"+strconv.Itoa(n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// slug is GitHub's heading id: lower case, letters, digits, '-' and '_'
// kept, spaces to '-', everything else dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestMarkdownLinksResolve(t *testing.T) {
	root := docsRoot(t)
	cache := map[string]map[string]bool{}
	anchorsOf := func(file string) map[string]bool {
		if a, ok := cache[file]; ok {
			return a
		}
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cache[file] = anchors(string(text))
		return cache[file]
	}
	links := 0
	for _, file := range markdownFiles(t, root) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		for i, line := range prose(string(text)) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: %v", rel, i+1, target, err)
						continue
					}
				}
				if frag != "" {
					if !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s: link %s: an anchor into a file that is not Markdown", rel, target)
					} else if !anchorsOf(dest)[frag] {
						t.Errorf("%s:%d: link %s: no heading with id %q", rel, i+1, target, frag)
					}
				}
			}
		}
	}
	if links < 30 {
		t.Fatalf("found only %d relative links: the link pattern no longer matches", links)
	}
}

// The current pages speak to readers who cannot open the project's tracker;
// the journal (processors/bench/HISTORY.md) is kept verbatim and may.
func TestDocsCiteNoInternalTracker(t *testing.T) {
	root := docsRoot(t)
	bad := regexp.MustCompile(`(?i)issue notes|\bissues? #?\d+|\bround \d+\b`)
	for _, name := range []string{"README.md", "BENCHMARKS.md", "processors/README.md", "cmd/OPERATING.md", "codecs/PRODUCING.md"} {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			if m := bad.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which a reader cannot open", name, i+1, m)
			}
		}
	}
}

// The README keeps its first command and the test command .ci/run runs, and
// a table of contents near the top.
func TestREADMEKeepsItsCommands(t *testing.T) {
	root := docsRoot(t)
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(text)
	for _, want := range []string{"go run ./cmd/fencestream\n", "go test -race ./...\n", "](processors/README.md)", "](BENCHMARKS.md)", "](cmd/OPERATING.md)"} {
		if !strings.Contains(s, want) {
			t.Errorf("README.md no longer contains %q", want)
		}
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "go test -race ./...") {
		t.Error(".ci/run no longer runs the README's test command")
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = lines[:40]
	}
	if !strings.Contains(strings.Join(lines, "\n"), "- [Write a processor](#write-a-processor)") {
		t.Error("README.md has no table of contents naming the framework in its first 40 lines")
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"9. Storage and producer flush: the defaults":   "9-storage-and-producer-flush-the-defaults",
		"The processing guarantee":                      "the-processing-guarantee",
		"What a consumer of fence-triggers can rely on": "what-a-consumer-of-fence-triggers-can-rely-on",
		"`fencectl bench scale` (items 6 and 7)":        "fencectl-bench-scale-items-6-and-7",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
