package natsutil_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kvroute/kvroute/internal/natsutil"
)

// TestTokenFile: a server started with a token refuses clients without it; Connect sends the
// token of an explicit file, of KVROUTE_NATS_TOKEN_FILE, or of the default file of a loopback
// URL's port; a stale default file does not stop a client of a server without a token.
func TestTokenFile(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(natsutil.TokenFileEnv, "")
	tok, err := natsutil.NewToken()
	if err != nil || len(tok) != 32 {
		t.Fatalf("token %q: %v", tok, err)
	}
	srv, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	url := srv.ClientURL()

	nc, err := natsutil.Connect(url, &natsutil.ConnectConfig{Options: []nats.Option{nats.RetryOnFailedConnect(false)}})
	if err == nil {
		nc.Close()
		t.Fatal("connected without a token")
	}
	// the refusal says where the token comes from (an operator test got only "Authorization Violation")
	if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "the token file "+natsutil.DefaultTokenFile(srv.Port())+" is missing or empty: pass --nats-token-file or set "+natsutil.TokenFileEnv) {
		t.Errorf("without a token: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := natsutil.WriteTokenFile(wrong, "not-the-token"); err != nil {
		t.Fatal(err)
	}
	if nc, err := natsutil.Connect(url, &natsutil.ConnectConfig{TokenFile: wrong}); err == nil {
		nc.Close()
		t.Fatal("connected with a wrong token")
	} else if !strings.Contains(err.Error(), "the token in "+wrong+" was refused") {
		t.Errorf("wrong token: %v", err)
	}
	explicit := filepath.Join(t.TempDir(), "tok")
	if err := natsutil.WriteTokenFile(explicit, tok); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(explicit); st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", st.Mode().Perm())
	}
	nc, err = natsutil.Connect(url, &natsutil.ConnectConfig{TokenFile: explicit})
	if err != nil {
		t.Fatalf("explicit token file: %v", err)
	}
	nc.Close()

	t.Setenv(natsutil.TokenFileEnv, explicit)
	if nc, err = natsutil.Connect(url, nil); err != nil {
		t.Fatalf("%s: %v", natsutil.TokenFileEnv, err)
	}
	nc.Close()
	t.Setenv(natsutil.TokenFileEnv, "")

	if err := natsutil.WriteTokenFile(natsutil.DefaultTokenFile(srv.Port()), tok); err != nil {
		t.Fatal(err)
	}
	if nc, err = natsutil.Connect(url, nil); err != nil {
		t.Fatalf("default token file: %v", err)
	}
	nc.Close()

	open, err := natsutil.StartEmbedded(&natsutil.EmbeddedConfig{Port: natsutil.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Shutdown()
	if err := natsutil.WriteTokenFile(natsutil.DefaultTokenFile(open.Port()), "stale"); err != nil {
		t.Fatal(err)
	}
	if nc, err = natsutil.Connect(open.ClientURL(), nil); err != nil {
		t.Fatalf("server without a token, stale token file: %v", err)
	}
	nc.Close()
}
