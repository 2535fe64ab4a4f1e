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
// transitively (non-test imports), on a package whose import path is one of forbidden or lies
// under one of them (a forbidden "p" matches p and p/...), unless the dependency is one of allow.
type rule struct {
	pattern   string
	forbidden []string
	allow     []string
	why       string
}

const caddy = "github.com/caddyserver/caddy"

var rules = []rule{
	// The shared core at the root: request → core ← events.
	{"./kv/...", []string{module}, []string{module + "/kv"}, "the shared core (kv, kv/blocks, kv/index) imports nothing of kvroute above it"},
	{"./reason", []string{module}, nil, "the reason vocabulary is a leaf every layer can use"},
	{"./kvevents/...", []string{module + "/routing"}, nil, "the event layer feeds the router through the core (kv/index); it must not import the request side"},
	{"./routing/...", []string{module + "/kvevents"}, []string{module + "/kvevents/wire"}, "the request side reads the index (kv/index), not the event layer; only the transport's names (kvevents/wire, a leaf) are shared"},
	{"./media/...", []string{module + "/routing", module + "/kvevents"}, nil, "media decodes and computes identities (kv.Identity); routing/mediaresolver adapts it to the router's port"},
	// Finer rules inside the layers.
	{"./routing/mediaport", []string{module + "/routing/router", module + "/routing/mediaresolver"}, nil, "the port sits below the router and its implementation"},
	{"./routing/mediaresolver", []string{module + "/routing/router"}, nil, "the media adapter implements routing/mediaport; it must not import the router"},
	{"./kvevents/codec", []string{module + "/kv/blocks"}, nil, "the production codec decodes; the extra_keys encoder is internal/extrakeys"},
	// The prompt-pieces seam (issue 30): template pieces → tokenizer ids and run keys → router.
	{"./routing/tokenizer", []string{module + "/kv", module + "/routing/router", module + "/routing/model", module + "/routing/chat"}, nil, "the tokenizer returns ids and run keys and knows nothing of blocks; the block-hash memo is the router's"},
	{"./internal/jinja", []string{module}, nil, "the jinja fork imports nothing of kvroute: its Piece and Note are the one piece type of the pieces path"},
	// The Caddy-free core.
	{"./kv/...", []string{caddy}, nil, "the core is Caddy-free"},
	{"./routing/...", []string{caddy}, nil, "the request side is Caddy-free"},
	{"./kvevents/...", []string{caddy}, nil, "the event side is Caddy-free"},
	{"./media/...", []string{caddy}, nil, "media is Caddy-free"},
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

// under reports whether path is p or a package below p.
func under(path, p string) bool { return path == p || strings.HasPrefix(path, p+"/") }

// matches reports whether pkg is one of the packages r.pattern names ("./p" or "./p/...").
func (r rule) matches(pkg string) bool {
	p := module + "/" + strings.TrimPrefix(r.pattern, "./")
	if base, ok := strings.CutSuffix(p, "/..."); ok {
		return under(pkg, base)
	}
	return pkg == p
}

// violations returns the forbidden dependencies of every package in m that r applies to.
func (r rule) violations(m map[string][]string) []string {
	var bad []string
	for pkg, ds := range m {
		if !r.matches(pkg) {
			continue
		}
		for _, d := range ds {
			if r.allowed(d) {
				continue
			}
			for _, f := range r.forbidden {
				if under(d, f) {
					bad = append(bad, pkg+" → "+d)
				}
			}
		}
	}
	return bad
}

func (r rule) allowed(d string) bool {
	for _, a := range r.allow {
		if under(d, a) {
			return true
		}
	}
	return false
}

func TestNoBackEdges(t *testing.T) {
	for _, r := range rules {
		for _, v := range r.violations(deps(t, r.pattern)) {
			t.Errorf("%s: %s", v, r.why)
		}
	}
}

// TestWireIsALeaf: kvevents/wire holds the transport's names the request side may share, so it
// imports nothing of kvroute itself.
func TestWireIsALeaf(t *testing.T) {
	for pkg, ds := range deps(t, "./kvevents/wire") {
		for _, d := range ds {
			if under(d, module) {
				t.Errorf("%s depends on %s; the wire vocabulary must be a leaf", pkg, d)
			}
		}
	}
}

// TestRulesCanFail: the listing sees the edges the rules look for (the router does depend on
// kv/blocks, the subscriber on kv/index), and the rules catch the edges the old tree had (issue
// 30: kvevents/loadsync imported routing/scheduler, media imported routing/reason), so an empty
// or broken listing or a rule that matches nothing cannot pass silently.
func TestRulesCanFail(t *testing.T) {
	for _, e := range []struct{ pkg, dep string }{
		{"./routing/router", module + "/kv/blocks"},
		{"./kvevents/subscriber", module + "/kv/index"},
	} {
		found := false
		for _, ds := range deps(t, e.pkg) {
			for _, d := range ds {
				found = found || d == e.dep
			}
		}
		if !found {
			t.Errorf("go list shows no %s under %s", e.dep, e.pkg)
		}
	}
	old := map[string][]string{
		module + "/kvevents/loadsync": {module + "/routing/scheduler", module + "/routing/index"},
		module + "/media":             {module + "/kvevents/wire", module + "/routing/reason"},
		module + "/media/resolver":    {module + "/routing/layout"},
		module + "/routing/router":    {module + "/kvevents/wire"},
		module + "/kvevents/wire":     {},
	}
	caught := map[string]bool{}
	for _, r := range rules {
		for _, v := range r.violations(old) {
			caught[v] = true
		}
	}
	for _, want := range []string{
		module + "/kvevents/loadsync → " + module + "/routing/scheduler",
		module + "/media → " + module + "/routing/reason",
		module + "/media → " + module + "/kvevents/wire",
		module + "/media/resolver → " + module + "/routing/layout",
	} {
		if !caught[want] {
			t.Errorf("the rules do not catch the old tree's edge %s", want)
		}
	}
	if caught[module+"/routing/router → "+module+"/kvevents/wire"] {
		t.Errorf("the rules forbid routing → kvevents/wire, which they allow")
	}
}
