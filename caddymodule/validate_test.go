package caddymodule_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// validate runs what `caddy validate --adapter caddyfile` runs: adapt, then caddy.Validate
// (provision and validate every module, start nothing).
func validate(t *testing.T, caddyfile string) error {
	t.Helper()
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting: %v", err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		t.Fatal(err)
	}
	return caddy.Validate(&cfg)
}

// TestValidateChecksModelDir: `caddy validate` loads the model folder, so a model_dir that does
// not exist, or is not a model folder, fails validation as it fails `caddy run` (issue 15); the
// test model passes.
func TestValidateChecksModelDir(t *testing.T) {
	cf := func(dir string) string {
		return `{
	admin off
	kvroute {
		embedded_nats {
			port random
		}
		model_dir ` + dir + `
	}
}
:0 {
	kvroute
	reverse_proxy 127.0.0.1:1
}
`
	}
	for name, tc := range map[string]struct{ dir, want string }{
		"missing folder":  {t.TempDir() + "/nosuch", "loading model"},
		"not a model dir": {"testdata", "loading model"},
		"test model":      {"../testdata/golden/qwen3vl-test-model", ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := validate(t, cf(tc.dir))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid model folder rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("model_dir %s: error %v, want one containing %q", tc.dir, err, tc.want)
			}
		})
	}
}

// TestValidateChecksNATSCredentials: `caddy run` reads nats_credentials when it connects and
// fails without the file, so `caddy validate` fails too (operator test: validate passed
// Caddyfile.example's default /etc/kvroute/router.creds, which did not exist, and run then
// exited); a readable file passes.
func TestValidateChecksNATSCredentials(t *testing.T) {
	creds := t.TempDir() + "/router.creds"
	if err := os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cf := func(path string) string {
		return `{
	admin off
	kvroute {
		nats_url nats://127.0.0.1:1
		nats_credentials ` + path + `
	}
}
:0 {
	kvroute
	reverse_proxy 127.0.0.1:1
}
`
	}
	missing := t.TempDir() + "/nosuch.creds"
	if err := validate(t, cf(missing)); err == nil || !strings.Contains(err.Error(), "nats_credentials: open "+missing) {
		t.Errorf("missing credentials file: %v", err)
	}
	if err := validate(t, cf(creds)); err != nil {
		t.Errorf("readable credentials file rejected: %v", err)
	}
}

// TestValidateChecksNATSURL: `caddy validate` refuses a nats_url nats.go could never dial (an
// out-of-range port was accepted and only failed in the background, operator test), and passes a
// cluster list.
func TestValidateChecksNATSURL(t *testing.T) {
	cf := func(url string) string {
		return `{
	admin off
	kvroute {
		nats_url ` + url + `
	}
}
:0 {
	kvroute
	reverse_proxy 127.0.0.1:1
}
`
	}
	want := "nats_url: entry 1 (nats://127.0.0.1:99999): port 99999, want 1-65535"
	if err := validate(t, cf("nats://127.0.0.1:99999")); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("port 99999: %v, want %q", err, want)
	}
	if err := validate(t, cf("nats://127.0.0.1:1,tls://127.0.0.1:2")); err != nil {
		t.Errorf("a valid cluster list rejected: %v", err)
	}
}
