package fetch_test

import (
	"testing"

	"github.com/kvroute/kvroute/media/fetch"
	"github.com/kvroute/kvroute/reason"
)

// TestCheck: the network-free check refuses what Fetch refuses before dialing, and lets through
// what only the dial-time guard can judge.
func TestCheck(t *testing.T) {
	f, err := fetch.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, u := range []string{
		"http://127.0.0.1/x", "http://169.254.169.254/latest", "http://[::1]:8080/", "http://2130706433/",
		"http://0x7f000001/", "http://10.0.0.1/v.webm", "ftp://example.com/v.webm", "file:///etc/passwd",
		"gopher://x", "javascript:alert(1)", "", "http://exa mple.com/",
	} {
		if err := f.Check(u); reason.CodeOf(err) != reason.MediaURLBlocked {
			t.Errorf("Check(%q) = %v, want media_url_blocked", u, err)
		}
	}
	for _, u := range []string{"https://example.com/v.webm", "HTTP://example.com/v.webm", "data:video/webm;base64,AAAA",
		"http://name-that-may-resolve-anywhere.example/v.webm"} {
		if err := f.Check(u); err != nil {
			t.Errorf("Check(%q) = %v, want nil", u, err)
		}
	}
}
