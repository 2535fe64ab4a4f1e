#!/usr/bin/env bash
# kvroute demo: exact video KV routing on the embedded default.
#
# Starts Caddy (./caddy, built by `make caddy`) with demo/Caddyfile — the router, its embedded
# NATS server and a loopback media site serving testdata/video — and two kvroute-sim workers
# (./bin/kvroute-sim, built by `make bins`) that load the same model folder, decode the video
# themselves, keep a block cache, publish KV events through the embedded NATS and register in the
# worker registry. It then sends video and text chat requests, prints one line per request on
# stderr, stops everything it started and prints, as the only and last stdout line,
#   {"requests":[{"name","worker","overlap_blocks","total_blocks","cached_tokens","fallback"}]}
# where worker is the chosen worker's id and fallback is null when the request was routed exactly
# (else its reason code). Logs: demo/.run/ (caddy.log, sim-N.log, <request>.headers/.body).
#
# Environment (defaults): KVROUTE_DEMO_HTTP_PORT (18080), KVROUTE_DEMO_ADMIN_PORT (12019),
# KVROUTE_DEMO_NATS_PORT (14222), KVROUTE_DEMO_MEDIA_PORT (18090), KVROUTE_DEMO_SIM_PORTS
# ("18001 18002"). Every port must be free: a busy one stops the demo before anything starts.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export KVROUTE_DEMO_HTTP_PORT="${KVROUTE_DEMO_HTTP_PORT:-18080}"
export KVROUTE_DEMO_ADMIN_PORT="${KVROUTE_DEMO_ADMIN_PORT:-12019}"
export KVROUTE_DEMO_NATS_PORT="${KVROUTE_DEMO_NATS_PORT:-14222}"
export KVROUTE_DEMO_MEDIA_PORT="${KVROUTE_DEMO_MEDIA_PORT:-18090}"
# The model folder and clips, relative to the repository root (Caddy and the simulators run there).
export KVROUTE_DEMO_MODEL_DIR="testdata/golden/qwen3vl-test-model"
export KVROUTE_DEMO_MEDIA_ROOT="testdata/video"
read -r -a sim_ports <<<"${KVROUTE_DEMO_SIM_PORTS:-18001 18002}"
model=kvroute-sim # the simulators' served model name (the requests' "model"; Caddyfile: dynamic kvroute kvroute-sim)

log() { echo "demo: $*" >&2; }
die() {
	echo "demo: error: $*" >&2
	exit 1
}

caddy_bin="$root/caddy"
sim_bin="$root/bin/kvroute-sim"
for b in "$caddy_bin" "$sim_bin"; do
	[ -x "$b" ] || die "$b missing (run: make bins caddy)"
done
for c in curl jq; do
	command -v "$c" >/dev/null || die "$c is required"
done
[ -d "$KVROUTE_DEMO_MODEL_DIR" ] || die "model folder $KVROUTE_DEMO_MODEL_DIR missing"

# Busy ports: refuse to start rather than talk to someone else's server.
for p in "$KVROUTE_DEMO_HTTP_PORT" "$KVROUTE_DEMO_ADMIN_PORT" "$KVROUTE_DEMO_NATS_PORT" \
	"$KVROUTE_DEMO_MEDIA_PORT" "${sim_ports[@]}"; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		die "port 127.0.0.1:$p is busy (another demo or server?); free it or set KVROUTE_DEMO_{HTTP,ADMIN,NATS,MEDIA}_PORT / KVROUTE_DEMO_SIM_PORTS"
	fi
done

run_dir="$root/demo/.run"
rm -rf "$run_dir"
mkdir -p "$run_dir"
pids=()
# stop PID: SIGTERM, then SIGKILL if it has not exited after 10 s.
stop() {
	local pid="$1" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}
# cleanup stops what this script started, newest first: the simulators deregister through the
# embedded NATS server, so Caddy (which runs it) stops last.
cleanup() {
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		stop "${pids[$i]}"
	done
	pids=()
}
trap cleanup EXIT
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 143' TERM

admin="http://127.0.0.1:$KVROUTE_DEMO_ADMIN_PORT"
workers() { curl -fsS --max-time 5 "$admin/kvroute/workers"; }

"$caddy_bin" run --config demo/Caddyfile --adapter caddyfile >"$run_dir/caddy.log" 2>&1 &
caddy_pid=$!
pids+=("$caddy_pid")
for _ in $(seq 1 150); do
	workers >/dev/null 2>&1 && break
	kill -0 "$caddy_pid" 2>/dev/null || break
	sleep 0.1
done
if ! kill -0 "$caddy_pid" 2>/dev/null || ! workers >/dev/null 2>&1; then
	tail -20 "$run_dir/caddy.log" >&2
	die "caddy did not start; see $run_dir/caddy.log"
fi
log "caddy up (admin $admin, embedded NATS 127.0.0.1:$KVROUTE_DEMO_NATS_PORT, media http://127.0.0.1:$KVROUTE_DEMO_MEDIA_PORT/)"

# The simulators: stock-vLLM stand-ins on loopback with the model folder above and their default
# contract (the hub hf_fps contract of DESIGN.md §2.3), registering through the embedded NATS.
i=0
for port in "${sim_ports[@]}"; do
	i=$((i + 1))
	"$sim_bin" -listen "127.0.0.1:$port" -worker-id "sim-$i" -served-model-name "$model" \
		-model "$KVROUTE_DEMO_MODEL_DIR" -nats "nats://127.0.0.1:$KVROUTE_DEMO_NATS_PORT" \
		-prefill-delay 20ms -token-delay 2ms >"$run_dir/sim-$i.log" 2>&1 &
	pids+=($!)
done
registered=""
for _ in $(seq 1 150); do
	n=$(workers 2>/dev/null | jq length) || n=0
	[ "$n" = "${#sim_ports[@]}" ] && registered=1 && break
	for pid in "${pids[@]:1}"; do
		kill -0 "$pid" 2>/dev/null || die "a simulator exited; see $run_dir/sim-*.log"
	done
	sleep 0.1
done
[ -n "$registered" ] || die "the simulators did not register within 15 s; see $run_dir/"
log "workers registered: $(workers | jq -c '[.[] | {worker_id, endpoint, contract_digest}]')"

url="http://127.0.0.1:$KVROUTE_DEMO_HTTP_PORT/v1/chat/completions"
results=()

# last_seq WORKER: the worker's last applied event sequence number (-1 before the first event).
last_seq() {
	workers | jq --arg w "$1" '[.[] | select(.worker_id == $w) | .last_seq // -1] | first // -1'
}

# request NAME JSON_BODY [settle]: sends one chat request and records its routing. With settle, it
# then waits (up to 5 s) until the router has applied the chosen worker's KV events for this
# request (its last_seq advanced), so that a repeat sent next is credited with the cached blocks.
request() {
	local name="$1" body="$2" settle="${3:-}" hdr out code worker overlap total fallback cached prompt hit before now
	hdr="$run_dir/$name.headers"
	out="$run_dir/$name.body"
	before=$(workers | jq -c 'map({key: .worker_id, value: (.last_seq // -1)}) | from_entries')
	code=$(curl -sS --max-time 60 -o "$out" -w '%{http_code}' -D "$hdr" -H 'Content-Type: application/json' \
		-H "X-Request-Id: demo-$name" --data-binary "$body" "$url") || die "request $name: curl failed"
	[ "$code" = 200 ] || die "request $name: HTTP $code: $(head -c 500 "$out")"
	header() { grep -i "^$1:" "$hdr" | head -1 | cut -d: -f2- | tr -d ' \r'; }
	worker=$(header X-Kvroute-Worker)
	overlap=$(header X-Kvroute-Overlap-Blocks)
	total=$(header X-Kvroute-Total-Blocks)
	fallback=$(header X-Kvroute-Fallback)
	hit=$(header X-Kvroute-Sim-Hit-Blocks)
	if grep -qi '^content-type: text/event-stream' "$hdr"; then
		cached=$(sed -n 's/^data: //p' "$out" | grep -v '^\[DONE\]' | jq -s '[.[] | .usage.prompt_tokens_details.cached_tokens // empty] | last // 0')
		prompt=$(sed -n 's/^data: //p' "$out" | grep -v '^\[DONE\]' | jq -s '[.[] | .usage.prompt_tokens // empty] | last // 0')
	else
		cached=$(jq '.usage.prompt_tokens_details.cached_tokens // 0' "$out")
		prompt=$(jq '.usage.prompt_tokens // 0' "$out")
	fi
	log "$(printf '%-16s worker %-6s overlap %4s/%-4s blocks  cached_tokens %5s/%-5s (worker hit %s blocks)  fallback %s' \
		"$name" "${worker:-?}" "${overlap:-0}" "${total:-0}" "$cached" "$prompt" "${hit:-?}" "${fallback:-none (exact)}")"
	results+=("$(jq -cn --arg name "$name" --arg worker "$worker" --argjson overlap "${overlap:-0}" \
		--argjson total "${total:-0}" --argjson cached "$cached" --arg fallback "$fallback" \
		'{name: $name, worker: $worker, overlap_blocks: $overlap, total_blocks: $total, cached_tokens: $cached,
		  fallback: (if $fallback == "" then null else $fallback end)}')")
	if [ -n "$settle" ] && [ -n "$worker" ]; then
		before=$(jq --arg w "$worker" '.[$w] // -1' <<<"$before")
		for _ in $(seq 1 50); do
			now=$(last_seq "$worker" 2>/dev/null) || now=-1
			[ "$now" -gt "$before" ] && return 0
			sleep 0.1
		done
		log "warning: no KV event of $worker applied within 5 s after $name (last_seq $now)"
	fi
}

# video REQUEST_URL: the seeds' example request (docs/seeds) for one clip.
video() {
	jq -cn --arg model "$model" --arg url "$1" '{model: $model, messages: [{role: "user", content: [
		{type: "text", text: "Describe this video."}, {type: "video_url", video_url: {url: $url}}]}], max_tokens: 32}'
}
media="http://127.0.0.1:$KVROUTE_DEMO_MEDIA_PORT"
clip="$media/vp9_640x360_30fps_10s.webm"
# The same clip under another URL and in another container: the .mkv remux of the .webm has the
# same decoded frames and metadata (30 fps, 10.0 s, 300 frames), hence the same identity
# (testdata/golden/video_identity.json: hf_fps e3e7a3756ad9d625 for both files).
clip_other="$media/vp9_640x360_30fps_10s.mkv"
clip_different="$media/vp8_320x240_25fps_4s.webm"

request video-cold "$(video "$clip")" settle
request video-warm "$(video "$clip")"
request video-other-url "$(video "$clip_other")"
request video-different "$(video "$clip_different")"

t1='{"model":"'$model'","messages":[{"role":"system","content":"You are a video analyst. Answer in one short paragraph, name the objects you see, and say when each appears."},{"role":"user","content":"What happens in the first scene of the clip we watched yesterday?"}],"max_tokens":8}'
t2='{"model":"'$model'","messages":[{"role":"system","content":"You are a video analyst. Answer in one short paragraph, name the objects you see, and say when each appears."},{"role":"user","content":"What happens in the first scene of the clip we watched yesterday?"},{"role":"assistant","content":"A red car drives by."},{"role":"user","content":"And then?"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}'
request text-cold "$t1" settle
request text-warm "$t1"
request text-stream "$t2"

cleanup
trap - EXIT INT TERM
printf '{"requests":[%s]}\n' "$(
	IFS=,
	echo "${results[*]}"
)"
