package jinja

import (
	"bufio"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// upstreamRecord is UPSTREAM parsed: its single-valued keys, its copied files (local path ->
// module path) and our own files.
type upstreamRecord struct {
	keys   map[string]string
	copied map[string]string
	ours   []string
}

func readUpstream(t *testing.T) upstreamRecord {
	t.Helper()
	f, err := os.Open("UPSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := upstreamRecord{keys: map[string]string{}, copied: map[string]string{}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		local := ""
		switch fields[0] {
		case "file":
			if len(fields) != 3 {
				t.Fatalf("UPSTREAM:%d: want `file <module path> <local path>`: %q", n, line)
			}
			local = fields[2]
			r.copied[local] = fields[1]
		case "ours":
			if len(fields) != 2 {
				t.Fatalf("UPSTREAM:%d: want `ours <path>`: %q", n, line)
			}
			local = fields[1]
			r.ours = append(r.ours, local)
		default:
			if len(fields) != 2 {
				t.Fatalf("UPSTREAM:%d: want `<key> <value>`: %q", n, line)
			}
			if _, dup := r.keys[fields[0]]; dup {
				t.Fatalf("UPSTREAM:%d: %s given twice", n, fields[0])
			}
			r.keys[fields[0]] = fields[1]
		}
		if local != "" {
			if seen[local] {
				t.Errorf("UPSTREAM:%d: %s listed twice", n, local)
			}
			seen[local] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestUpstreamRecord checks UPSTREAM's header: what upstream-diff.sh fetches and verifies.
func TestUpstreamRecord(t *testing.T) {
	r := readUpstream(t)
	want := map[string]*regexp.Regexp{
		"module":     regexp.MustCompile(`^github\.com/ardanlabs/jinja$`),
		"version":    regexp.MustCompile(`^v\d+\.\d+\.\d+$`),
		"h1":         regexp.MustCompile(`^h1:[A-Za-z0-9+/]{43}=$`),
		"gomod-h1":   regexp.MustCompile(`^h1:[A-Za-z0-9+/]{43}=$`),
		"zip-sha256": regexp.MustCompile(`^[0-9a-f]{64}$`),
		"commit":     regexp.MustCompile(`^([0-9a-f]{40}|unknown)$`),
		"time":       regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
		"date":       regexp.MustCompile(`^\d{4}-\d\d-\d\d$`),
	}
	for k, re := range want {
		if v, ok := r.keys[k]; !ok || !re.MatchString(v) {
			t.Errorf("UPSTREAM %s = %q, want a value matching %s", k, v, re)
		}
	}
	for k := range r.keys {
		if want[k] == nil {
			t.Errorf("UPSTREAM: unknown key %q", k)
		}
	}
}

// TestUpstreamFiles checks that every file in this directory is either copied from the module
// (a `file` line of UPSTREAM, so `make jinja-diff` shows it against upstream's) or one of ours
// (an `ours` line), that every listed file exists, and that every .go file of ours is named in
// README.md: a new file cannot slip in undocumented.
func TestUpstreamFiles(t *testing.T) {
	r := readUpstream(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		present[filepath.ToSlash(p)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range present {
		_, copied := r.copied[p]
		if !copied && !slices.Contains(r.ours, p) {
			t.Errorf("%s is neither copied from upstream (`file` in UPSTREAM) nor ours (`ours`)", p)
		}
	}
	for local, src := range r.copied {
		if !present[local] {
			t.Errorf("UPSTREAM copies %s to %s, which is missing", src, local)
		}
		// Engine sources keep upstream's name; upstream's tests get the upstream_ prefix.
		want := src
		if strings.HasSuffix(src, "_test.go") {
			want = path.Join(path.Dir(src), "upstream_"+path.Base(src))
		}
		if local != want {
			t.Errorf("UPSTREAM copies %s to %s, want %s", src, local, want)
		}
		if strings.HasSuffix(local, "_test.go") {
			b, err := os.ReadFile(local)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"github.com/ardanlabs/jinja"`) {
				t.Errorf("%s imports github.com/ardanlabs/jinja, not this copy", local)
			}
		}
	}
	for _, p := range r.ours {
		if !present[p] {
			t.Errorf("UPSTREAM lists %s as ours, which is missing", p)
		}
		if _, dup := r.copied[p]; dup {
			t.Errorf("%s is listed both as copied and as ours", p)
		}
		if strings.HasPrefix(path.Base(p), "upstream_") {
			t.Errorf("%s is ours: the upstream_ prefix marks upstream's tests", p)
		}
		if strings.HasSuffix(p, ".go") && !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("%s is ours but README.md does not name it (`%s`)", p, p)
		}
	}
	var goFiles int
	for p := range present {
		if strings.HasSuffix(p, ".go") {
			goFiles++
		}
	}
	if goFiles < 10 {
		t.Errorf("found %d .go files; the walk did not see this directory", goFiles)
	}
}
