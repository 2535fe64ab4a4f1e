package importrules

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/kvroute/kvroute"

// rule forbids every package matched by pattern (a `go list` pattern) to depend, directly or
// transitively (non-test imports), on any of forbidden.
type rule struct {
	pattern   string
	forbidden []string
	why       string
}

var rules = []rule{
	{"./kvevents/...", []string{module + "/routing/router"}, "the event layer feeds the router; it must not import it"},
	{"./media/...", []string{module + "/routing/router"}, "media implements routing/mediaport; it must not import the router"},
	{"./routing/mediaport", []string{module + "/routing/router"}, "the port sits below the router"},
	{"./kvevents/codec", []string{module + "/routing/blocks"}, "the production codec decodes; the extra_keys encoder is internal/extrakeys"},
}

// goTool is the go command of the toolchain running the test, so the listing matches the build.
func goTool() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(p); err == nil {
		return p
	}
	return "go"
}

// deps lists, for every package matched by pattern, its transitive non-test dependencies.
func deps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.Command(goTool(), "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", pattern)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pattern, err, stderr.String())
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m[f[0]] = f[1:]
	}
	if len(m) == 0 {
		t.Fatalf("go list %s matched no package", pattern)
	}
	return m
}

func TestNoBackEdges(t *testing.T) {
	for _, r := range rules {
		for pkg, ds := range deps(t, r.pattern) {
			for _, d := range ds {
				for _, f := range r.forbidden {
					if d == f {
						t.Errorf("%s depends on %s: %s", pkg, f, r.why)
					}
				}
			}
		}
	}
}

// TestWireIsALeaf: kvevents/wire is the shared vocabulary every layer imports, so it imports
// nothing of kvroute itself.
func TestWireIsALeaf(t *testing.T) {
	for pkg, ds := range deps(t, "./kvevents/wire") {
		for _, d := range ds {
			if strings.HasPrefix(d, module+"/") {
				t.Errorf("%s depends on %s; the wire vocabulary must be a leaf", pkg, d)
			}
		}
	}
}

// TestRulesCanFail: the listing sees the edges the rules look for (the router does depend on
// routing/blocks), so an empty or broken listing cannot pass the rules above silently.
func TestRulesCanFail(t *testing.T) {
	ds := deps(t, "./routing/router")[module+"/routing/router"]
	found := false
	for _, d := range ds {
		found = found || d == module+"/routing/blocks"
	}
	if !found {
		t.Fatalf("go list shows no routing/blocks under routing/router: %v", ds)
	}
}
