package caddymodule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// allowedGlobals are the package-level variables caddymodule may have besides interface guards
// (`var _ I = ...`), each with why it is process-wide. What survives a config reload lives in a
// caddy.UsagePool (natsPool, sharedPool), never in a package variable of its own: a new cache,
// map or pointer at package level fails TestNoPackageStateOutsidePools until it is moved into a
// pool or listed here with its reason.
var allowedGlobals = map[string]string{
	"natsPool":   "the Caddy usage pool of the NATS connection (shared_nats.go)",
	"sharedPool": "the Caddy usage pool of the caches, the response map and the media budget (shared.go)",
	"kvMetrics":  "Prometheus collectors: one set per process, registered with every config's registry so counters do not reset",
	"bodyPools":  "sync.Pool buffers of request bodies by size class (no state: any buffer may be dropped)",
	"replicaID":  "this process's id among replicas (a constant after init)",
	// process-wide runtime settings: one soft memory limit and one freer per process
	"memLimitMu": "guards memLimitSet", "memLimitSet": "the soft memory limit kvroute set",
	"freerMu": "guards the freer's refcount", "freerRefs": "running configs using the freer",
	"freerStop": "stops the freer", "frees": "FreeOSMemory calls (a test counter)",
	// constant-like values: never written after init
	"DefaultUpstreamCIDRs": "the default allow-list", "hitRatioBuckets": "histogram bounds",
	"upstreamMessages": "fixed error texts", "arrivals": "the counted subscriber results",
	"tokenizerFiles": "the tokenizer file names", "errBodyDone": "a sentinel error",
	"errNATSNotConnected": "a sentinel error",
	"templateCacheHits":   "a metric description", "templateCacheMisses": "a metric description",
	"templateCacheBytes": "a metric description", "templateReplays": "a metric description",
	"tokenizeCacheHits": "a metric description", "tokenizeCacheMisses": "a metric description",
	"tokenizeCacheBytes": "a metric description",
}

// TestNoPackageStateOutsidePools parses the package's files and fails on a package-level variable
// not in allowedGlobals: the caches that survive reloads must be in a caddy.UsagePool (issue 30),
// as the shared NATS is, not in package globals such as the former currentMessageCache and
// currentTokenizeCache.
func TestNoPackageStateOutsidePools(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	seen := map[string]bool{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, spec := range g.Specs {
					for _, n := range spec.(*ast.ValueSpec).Names {
						if n.Name == "_" {
							continue // an interface guard
						}
						seen[n.Name] = true
						if _, ok := allowedGlobals[n.Name]; !ok {
							bad = append(bad, fset.Position(n.Pos()).String()+" "+n.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("package-level variable %s: keep what survives reloads in a caddy.UsagePool (natsPool, sharedPool), or list it in allowedGlobals with its reason", b)
	}
	for name := range allowedGlobals {
		if !seen[name] {
			t.Errorf("allowedGlobals lists %s, which is no package-level variable any more: remove it", name)
		}
	}
}
