package caddymodule_test

import (
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestCaddyfileErrors checks that malformed kvroute Caddyfile syntax is rejected with a message
// that names the problem.
func TestCaddyfileErrors(t *testing.T) {
	site := func(body string) string { return ":8080 {\n" + body + "\n}\n" }
	global := func(body string) string {
		return "{\n\tkvroute {\n" + body + "\n\t}\n}\n" + site("kvroute\nreverse_proxy 127.0.0.1:1")
	}
	cases := map[string]struct{ src, want string }{
		"handler unknown option":  {site("kvroute {\n bogus 1\n}"), "unrecognized subdirective 'bogus'"},
		"handler bad size":        {site("kvroute {\n max_body_size lots\n}"), "invalid max_body_size 'lots'"},
		"handler duplicate size":  {site("kvroute {\n max_body_size 1MiB\n max_body_size 2MiB\n}"), "max_body_size already specified"},
		"handler bad timeout":     {site("kvroute {\n read_timeout soon\n}"), "invalid read_timeout 'soon'"},
		"handler extra argument":  {site("kvroute {\n read_timeout 1s 2s\n}"), "wrong argument count"},
		"policy unknown option":   {site("reverse_proxy 127.0.0.1:1 {\n lb_policy kvroute {\n  nope\n }\n}"), "unrecognized subdirective 'nope'"},
		"policy duplicate":        {site("reverse_proxy 127.0.0.1:1 {\n lb_policy kvroute {\n  fallback random\n  fallback first\n }\n}"), "fallback selection policy already specified"},
		"policy unknown fallback": {site("reverse_proxy 127.0.0.1:1 {\n lb_policy kvroute {\n  fallback nosuch\n }\n}"), "nosuch"},
		"upstreams two models":    {site("reverse_proxy {\n dynamic kvroute a b\n}"), "wrong argument count"},
		"global unknown option":   {global("\t\tnope"), "unrecognized subdirective 'nope'"},
		"global duplicate url":    {global("\t\tnats_url nats://a:4222\n\t\tnats_url nats://b:4222"), "nats_url already specified"},
		"embedded bad port":       {global("\t\tembedded_nats {\n\t\t\tport 99999\n\t\t}"), "invalid port '99999'"},
		"worker without id":       {global("\t\tworker {\n\t\t\tmodel m\n\t\t}"), "wrong argument count"},
		"worker duplicate":        {global("\t\tworker a {\n\t\t\tmodel m\n\t\t}\n\t\tworker a {\n\t\t\tmodel m\n\t\t}"), "worker 'a' already specified"},
		"worker bad block size":   {global("\t\tworker a {\n\t\t\tblock_size 0\n\t\t}"), "invalid block_size '0'"},
		"worker duplicate option": {global("\t\tworker a {\n\t\t\tmodel m\n\t\t\tmodel n\n\t\t}"), "model already specified"},
		"worker unknown option":   {global("\t\tworker a {\n\t\t\tgpu h100\n\t\t}"), "unrecognized subdirective 'gpu'"},
		"scheduler unknown cost":  {global("\t\tscheduler {\n\t\t\tcost quadratic\n\t\t}"), `cost must be ttft2, ttft or linear, not "quadratic"`},
		// an option given twice in a block: the last value silently won before
		"scheduler duplicate cost":   {global("\t\tscheduler {\n\t\t\tcost linear\n\t\t\tcost ttft\n\t\t}"), "scheduler option 'cost' already specified"},
		"media duplicate max_bytes":  {global("\t\tmedia {\n\t\t\tmax_bytes 1MiB\n\t\t\tmax_bytes 2MiB\n\t\t}"), "media option 'max_bytes' already specified"},
		"index duplicate max_blocks": {global("\t\tindex {\n\t\t\tmax_blocks 10\n\t\t\tmax_blocks 20\n\t\t}"), "index option 'max_blocks' already specified"},
		"apis duplicate store":       {global("\t\tapis {\n\t\t\tresponses_store on\n\t\t\tresponses_store off\n\t\t}"), "apis option 'responses_store' already specified"},
		"health duplicate interval":  {global("\t\thealth_checks {\n\t\t\tinterval 1s\n\t\t\tinterval 2s\n\t\t}"), "health_checks option 'interval' already specified"},
		"embedded duplicate token":   {global("\t\tembedded_nats {\n\t\t\ttoken_file /a\n\t\t\ttoken_file /b\n\t\t}"), "embedded_nats option 'token_file' already specified"},
		"scheduler bad running":      {global("\t\tscheduler {\n\t\t\tmax_running -2\n\t\t}"), "max_running"},
		"scheduler bad balance":      {global("\t\tscheduler {\n\t\t\tbalance_factor 0.5\n\t\t}"), `balance_factor: "0.5" is not off or a number >= 1`},
		"scheduler bad queue":        {global("\t\tscheduler {\n\t\t\tqueue_wait_tokens many\n\t\t}"), "queue_wait_tokens"},
		// ParseFloat accepts these; JSON cannot carry them (the app became null, no option named)
		"scheduler NaN temperature": {global("\t\tscheduler {\n\t\t\ttemperature NaN\n\t\t}"), `temperature: "NaN" is not a finite number`},
		"scheduler Inf credit":      {global("\t\tscheduler {\n\t\t\toverlap_credit +Inf\n\t\t}"), `overlap_credit: "+Inf" is not a finite number`},
		"scheduler Inf scale":       {global("\t\tscheduler {\n\t\t\tprefill_load_scale Inf\n\t\t}"), `prefill_load_scale: "Inf" is not a finite number`},
		"scheduler NaN queue":       {global("\t\tscheduler {\n\t\t\tqueue_wait_tokens nan\n\t\t}"), `queue_wait_tokens: "nan" is not a finite number`},
		"scheduler NaN balance":     {global("\t\tscheduler {\n\t\t\tbalance_factor NaN\n\t\t}"), `balance_factor: "NaN" is not off or a number >= 1`},
		// refused when provisioned, without a file and line, before
		"scheduler negative temperature": {global("\t\tscheduler {\n\t\t\ttemperature -1\n\t\t}"), `temperature: "-1" is below 0`},
		"scheduler negative credit":      {global("\t\tscheduler {\n\t\t\toverlap_credit -2\n\t\t}"), `overlap_credit: "-2" is below 0`},
		"scheduler negative queue":       {global("\t\tscheduler {\n\t\t\tqueue_wait_tokens -5\n\t\t}"), `queue_wait_tokens: "-5" is below 0`},
		// JSON 0 means 1024: a Caddyfile 0 would silently become it
		"scheduler zero queue":     {global("\t\tscheduler {\n\t\t\tqueue_wait_tokens 0\n\t\t}"), `queue_wait_tokens: "0" is not a positive number`},
		"media bad image identity": {global("\t\tmedia {\n\t\t\timage_identity url\n\t\t}"), `image_identity "url": want pixels or bytes`},
		// limits whose JSON zero means "the default": a Caddyfile 0 would silently become it
		"max_media 0":              {global("\t\tmax_media 0"), `max_media: "0" is not a positive integer`},
		"max_messages 0":           {global("\t\tmax_messages 0"), `max_messages: "0" is not a positive integer`},
		"max_parts 0":              {global("\t\tmax_parts 0"), `max_parts: "0" is not a positive integer`},
		"max_parts negative":       {global("\t\tmax_parts -5"), `max_parts: "-5" is not a positive integer`},
		"index max_blocks 0":       {global("\t\tindex {\n\t\t\tmax_blocks 0\n\t\t}"), `max_blocks: "0" is not a positive integer`},
		"media decoded frames 0":   {global("\t\tmedia {\n\t\t\tmax_decoded_frames 0\n\t\t}"), `max_decoded_frames: "0" is not a positive integer`},
		"media unknown codec":      {global("\t\tmedia {\n\t\t\tcodecs vp9 avc\n\t\t}"), `codecs: unknown codec "avc"`},
		"media no codec":           {global("\t\tmedia {\n\t\t\tcodecs\n\t\t}"), "wrong argument count"},
		"media frame size 0":       {global("\t\tmedia {\n\t\t\tmax_frame_size 0 0\n\t\t}"), `"0" is not a positive integer`},
		"media decode slots 0":     {global("\t\tmedia {\n\t\t\tdecode_slots 0\n\t\t}"), `decode_slots: "0" is not a positive integer`},
		"scheduler balance window": {global("\t\tscheduler {\n\t\t\tbalance_window 0\n\t\t}"), `balance_window: "0" is not a positive integer`},
		"scheduler bad affinity":   {global("\t\tscheduler {\n\t\t\taffinity maybe\n\t\t}"), `affinity must be on or off, not "maybe"`},
		"apis inline system":       {global("\t\tapis {\n\t\t\tanthropic_inline_system auto\n\t\t}"), `anthropic_inline_system must be preserve or fold, not "auto"`},
		"apis disabled effort":     {global("\t\tapis {\n\t\t\tanthropic_disabled_thinking_effort high\n\t\t}"), `anthropic_disabled_thinking_effort must be none or low, not "high"`},
		"apis store":               {global("\t\tapis {\n\t\t\tresponses_store yes\n\t\t}"), `responses_store must be on or off, not "yes"`},
		"apis ttl":                 {global("\t\tapis {\n\t\t\tresponse_ttl 0s\n\t\t}"), `response_ttl: "0s" is not a positive duration`},
		"apis max responses":       {global("\t\tapis {\n\t\t\tmax_responses 0\n\t\t}"), `max_responses: "0" is not a positive integer`},
		"apis unknown":             {global("\t\tapis {\n\t\t\tharmony on\n\t\t}"), `unrecognized apis option 'harmony'`},
		"apis twice":               {global("\t\tapis {\n\t\t}\n\t\tapis {\n\t\t}"), `apis already specified`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(c.src), nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestCaddyfileExample adapts the repository's Caddyfile.example and checks the kvroute parts.
func TestCaddyfileExample(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapting Caddyfile.example: %v", err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %v", warnings)
	}
	for _, want := range []string{
		`"kvroute":{"nats_url":"nats://nats-1.internal:4222,nats://nats-2.internal:4222","nats_credentials":"/etc/kvroute/router.creds","model_dir":"/srv/models/Qwen3-VL-8B-Instruct"}`,
		`"handler":"kvroute","max_body_size":67108864,"read_timeout":30000000000`,
		`"dynamic_upstreams":{"model":"Qwen/Qwen3-VL-8B-Instruct","source":"kvroute"}`,
		`"selection_policy":{"fallback":{"policy":"least_conn"},"policy":"kvroute"}`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("adapted config lacks %s", want)
		}
	}
	if strings.Contains(string(out), `"automatic_https":{"disable":true}`) {
		t.Error("Caddyfile.example must keep automatic HTTPS")
	}
}
