package fetch

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kvroute/kvroute/reason"
)

// fetchFile reads a file: URL under Config.FileRoot. The URL path is absolute ("file:///srv/media/a.webm",
// host empty or "localhost"), percent-decoded, and cleaned lexically; it must lie under the root before
// anything on disk is touched (so /etc/passwd is never even stat'ed), and again after
// filepath.EvalSymlinks. The file is then opened through an os.Root on the resolved root, so a link
// swapped in after the check still cannot lead out of it, with O_NONBLOCK so a FIFO cannot stall the
// open, and must be a regular file. Errors: reason.MediaURLBlocked (no root, outside the root, not a
// regular file), reason.MediaFetchFailed (missing or unreadable), reason.MediaTooLarge.
func (f *Fetcher) fetchFile(ctx context.Context, rawURL string, h *hold) ([]byte, error) {
	if f.p.fileRoot == "" {
		return nil, reason.New(reason.MediaURLBlocked, "file media URLs are not enabled")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, reason.Wrap(reason.MediaURLBlocked, err, "media URL is malformed")
	}
	if h := strings.ToLower(u.Host); h != "" && h != "localhost" {
		return nil, reason.New(reason.MediaURLBlocked, "file media URLs must not name a host")
	}
	if u.Opaque != "" || !strings.HasPrefix(u.Path, "/") || strings.IndexByte(u.Path, 0) >= 0 {
		return nil, reason.New(reason.MediaURLBlocked, "file media URL must have an absolute path")
	}
	clean := filepath.Clean(u.Path)
	if !under(clean, f.p.fileRootLex) && !under(clean, f.p.fileRoot) {
		return nil, reason.New(reason.MediaURLBlocked, "media file is outside the allowed root")
	}
	if err := ctx.Err(); err != nil {
		return nil, reason.Wrap(reason.MediaFetchFailed, err, "fetching media file was canceled")
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return nil, fileErr(err)
	}
	if !under(real, f.p.fileRoot) {
		return nil, reason.New(reason.MediaURLBlocked, "media file is outside the allowed root")
	}
	rel, err := filepath.Rel(f.p.fileRoot, real)
	if err != nil || rel == "." {
		return nil, reason.New(reason.MediaURLBlocked, "media file is not a regular file")
	}
	root, err := os.OpenRoot(f.p.fileRoot)
	if err != nil {
		return nil, reason.Wrap(reason.MediaFetchFailed, err, "opening media file root failed")
	}
	defer root.Close()
	// Lstat first: open(2) on a FIFO or device could block or have side effects.
	fi, err := root.Lstat(rel)
	if err != nil {
		return nil, fileErr(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, reason.New(reason.MediaURLBlocked, "media file is not a regular file")
	}
	fh, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fileErr(err)
	}
	defer fh.Close()
	fi, err = fh.Stat()
	if err != nil {
		return nil, fileErr(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, reason.New(reason.MediaURLBlocked, "media file is not a regular file")
	}
	if fi.Size() > f.p.maxBytes {
		return nil, reason.New(reason.MediaTooLarge, "media is larger than %d bytes", f.p.maxBytes)
	}
	b, err := readCapped(ctx, fh, f.p.maxBytes, fi.Size(), h)
	if err != nil {
		if reason.CodeOf(err) != "" {
			return nil, err
		}
		return nil, reason.Wrap(reason.MediaFetchFailed, err, "reading media file failed")
	}
	return b, nil
}

// under reports whether the clean absolute path p is root or below it.
func under(p, root string) bool {
	if p == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(p, root)
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}

// fileErr maps a filesystem error to a client-safe reason (no paths in the message).
func fileErr(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return reason.Wrap(reason.MediaFetchFailed, err, "media file not found")
	case errors.Is(err, fs.ErrPermission):
		return reason.Wrap(reason.MediaFetchFailed, err, "media file is not readable")
	case errors.Is(err, syscall.ELOOP):
		return reason.Wrap(reason.MediaURLBlocked, err, "media file is outside the allowed root")
	}
	return reason.Wrap(reason.MediaFetchFailed, err, "reading media file failed")
}
