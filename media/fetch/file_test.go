package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

// fileTree builds, under a temp dir:
//
//	root/clip.webm            regular file
//	root/sub/deep.webm        regular file
//	root/inside -> clip.webm  link that stays inside
//	root/escape -> ../outside/secret, root/escape_dir -> ../outside, root/etc -> /etc
//	root/fifo                 named pipe
//	root/dir/                 directory
//	outside/secret            a file outside the root
//	link_to_root -> root      a root given through a link
func fileTree(t *testing.T) (base, root string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "dir"), 0o755))
	must(os.MkdirAll(filepath.Join(base, "outside"), 0o755))
	must(os.WriteFile(filepath.Join(root, "clip.webm"), []byte("clip"), 0o600))
	must(os.WriteFile(filepath.Join(root, "sub", "deep.webm"), []byte("deep"), 0o600))
	must(os.WriteFile(filepath.Join(base, "outside", "secret"), []byte("secret"), 0o600))
	must(os.Symlink("clip.webm", filepath.Join(root, "inside")))
	must(os.Symlink("../outside/secret", filepath.Join(root, "escape")))
	must(os.Symlink("../outside", filepath.Join(root, "escape_dir")))
	must(os.Symlink("/etc", filepath.Join(root, "etc")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	must(os.Symlink(root, filepath.Join(base, "link_to_root")))
	return base, root
}

func TestFileURL(t *testing.T) {
	base, root := fileTree(t)
	cfg := fetch.DefaultConfig()
	cfg.FileRoot = root
	cfg.MaxBytes = 5
	f := newFetcher(t, cfg)
	ok := map[string]string{
		"file://" + root + "/clip.webm":          "clip",
		"file://localhost" + root + "/clip.webm": "clip",
		"file://" + root + "/sub/deep.webm":      "deep",
		"file://" + root + "/sub/../clip.webm":   "clip",
		"file://" + root + "/%63lip.webm":        "clip",
		"file://" + root + "/inside":             "clip",
	}
	for u, want := range ok {
		got, err := f.Fetch(context.Background(), u)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", u, got, err, want)
		}
	}
	bad := map[string]reason.Code{
		"file:///etc/passwd":                                 reason.MediaURLBlocked,
		"FILE:///etc/passwd":                                 reason.MediaURLBlocked,
		"file://localhost/etc/shadow":                        reason.MediaURLBlocked,
		"file:///proc/self/environ":                          reason.MediaURLBlocked,
		"file:///dev/zero":                                   reason.MediaURLBlocked,
		"file:///dev/stdin":                                  reason.MediaURLBlocked,
		"file://" + root + "/../outside/secret":              reason.MediaURLBlocked,
		"file://" + root + "/%2e%2e/outside/secret":          reason.MediaURLBlocked,
		"file://" + root + "/escape":                         reason.MediaURLBlocked, // link out of the root
		"file://" + root + "/escape_dir/secret":              reason.MediaURLBlocked,
		"file://" + root + "/etc/passwd":                     reason.MediaURLBlocked,
		"file://" + root + "/dir":                            reason.MediaURLBlocked, // directory
		"file://" + root:                                     reason.MediaURLBlocked, // the root itself
		"file://" + root + "/fifo":                           reason.MediaURLBlocked, // never opened, so never blocks
		"file://otherhost" + root + "/clip.webm":             reason.MediaURLBlocked,
		"file:clip.webm":                                     reason.MediaURLBlocked,
		"file://" + root + "/missing.webm":                   reason.MediaFetchFailed,
		"file://" + root + "/sub/deep.webm/x":                reason.MediaFetchFailed,
		"file://" + base + "/outside/secret":                 reason.MediaURLBlocked,
		"file://" + base + "/rootX/clip.webm":                reason.MediaURLBlocked, // prefix, not a parent
		"file://" + base + "/link_to_root/../outside/secret": reason.MediaURLBlocked,
	}
	for u, want := range bad {
		_, err := f.Fetch(context.Background(), u)
		wantCode(t, u, err, want)
	}

	// Over the size cap (MaxBytes 5): "secret" is 6 bytes once copied inside.
	if err := os.WriteFile(filepath.Join(root, "big"), []byte("toobig"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := f.Fetch(context.Background(), "file://"+root+"/big")
	wantCode(t, "big", err, reason.MediaTooLarge)
}

// TestFileRootThroughLink: a root configured through a symbolic link accepts paths spelled either way.
func TestFileRootThroughLink(t *testing.T) {
	base, root := fileTree(t)
	cfg := fetch.DefaultConfig()
	cfg.FileRoot = filepath.Join(base, "link_to_root")
	f := newFetcher(t, cfg)
	for _, u := range []string{"file://" + base + "/link_to_root/clip.webm", "file://" + root + "/clip.webm"} {
		if b, err := f.Fetch(context.Background(), u); err != nil || string(b) != "clip" {
			t.Errorf("%s: %q, %v", u, b, err)
		}
	}
	_, err := f.Fetch(context.Background(), "file://"+base+"/link_to_root/escape")
	wantCode(t, "escape through linked root", err, reason.MediaURLBlocked)
}

func TestFileURLDisabled(t *testing.T) {
	_, root := fileTree(t)
	f := newFetcher(t, fetch.DefaultConfig())
	_, err := f.Fetch(context.Background(), "file://"+root+"/clip.webm")
	wantCode(t, "no root", err, reason.MediaURLBlocked)
}
