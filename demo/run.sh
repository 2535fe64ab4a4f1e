#!/usr/bin/env bash
# kvroute demo: starts Caddy (./caddy, built by `make caddy`) with demo/Caddyfile and two
# kvroute-sim workers (./bin/kvroute-sim, built by `make bins`), sends a few chat requests, prints
# one line per request on stderr, stops everything it started, and prints as the last stdout line
#   {"requests":[{"name","worker","overlap_blocks","total_blocks","cached_tokens","fallback"}]}
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

export KVROUTE_DEMO_HTTP_PORT="${KVROUTE_DEMO_HTTP_PORT:-18080}"
export KVROUTE_DEMO_ADMIN_PORT="${KVROUTE_DEMO_ADMIN_PORT:-12019}"
export KVROUTE_DEMO_NATS_PORT="${KVROUTE_DEMO_NATS_PORT:-14222}"
sim_ports=(18001 18002)
caddy_bin="$root/caddy"
sim_bin="$root/bin/kvroute-sim"
for b in "$caddy_bin" "$sim_bin"; do
	[ -x "$b" ] || { echo "run.sh: $b missing (run: make bins caddy)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "run.sh: jq is required" >&2; exit 1; }

run_dir="$root/demo/.run"
mkdir -p "$run_dir"
pids=()
# cleanup stops what this script started, newest first: the simulators deregister through the
# embedded NATS server, so Caddy (which runs it) stops last.
cleanup() {
	local i pid
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid="${pids[$i]}"
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	pids=()
}
trap cleanup EXIT INT TERM

log() { echo "demo: $*" >&2; }

"$caddy_bin" run --config demo/Caddyfile --adapter caddyfile >"$run_dir/caddy.log" 2>&1 &
pids+=($!)
admin="http://127.0.0.1:$KVROUTE_DEMO_ADMIN_PORT"
for _ in $(seq 1 100); do
	curl -fsS "$admin/kvroute/workers" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fsS "$admin/kvroute/workers" >/dev/null || { log "caddy did not start; see $run_dir/caddy.log"; tail -20 "$run_dir/caddy.log" >&2; exit 1; }
log "caddy up (admin $admin, embedded NATS 127.0.0.1:$KVROUTE_DEMO_NATS_PORT)"

i=0
for port in "${sim_ports[@]}"; do
	i=$((i + 1))
	"$sim_bin" -listen "127.0.0.1:$port" -worker-id "sim-$i" -model kvroute-sim \
		-nats "nats://127.0.0.1:$KVROUTE_DEMO_NATS_PORT" -prefill-delay 20ms -token-delay 5ms \
		>"$run_dir/sim-$i.log" 2>&1 &
	pids+=($!)
done
for _ in $(seq 1 100); do
	n=$(curl -fsS "$admin/kvroute/workers" | jq length)
	[ "$n" = "${#sim_ports[@]}" ] && break
	sleep 0.1
done
log "workers registered: $(curl -fsS "$admin/kvroute/workers" | jq -c '[.[] | {worker_id, endpoint}]')"

url="http://127.0.0.1:$KVROUTE_DEMO_HTTP_PORT/v1/chat/completions"
results=()

# request NAME JSON_BODY: sends one chat request and records its routing.
request() {
	local name="$1" body="$2" hdr out worker overlap total fallback cached
	hdr="$run_dir/$name.headers"
	out=$(curl -fsS -D "$hdr" -H 'Content-Type: application/json' -H "X-Request-Id: demo-$name" --data-binary "$body" "$url")
	header() { grep -i "^$1:" "$hdr" | head -1 | cut -d: -f2- | tr -d ' \r'; }
	worker=$(header X-Kvroute-Worker)
	overlap=$(header X-Kvroute-Overlap-Blocks)
	total=$(header X-Kvroute-Total-Blocks)
	fallback=$(header X-Kvroute-Fallback)
	if grep -qi '^content-type: text/event-stream' "$hdr"; then
		cached=$(printf '%s\n' "$out" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' | jq -s '[.[] | .usage.prompt_tokens_details.cached_tokens // empty] | last // 0')
		[ -n "$worker" ] || worker=$(printf '%s\n' "$out" | sed -n 's/^data: //p' | head -1 | jq -r '.system_fingerprint // ""')
	else
		cached=$(printf '%s' "$out" | jq '.usage.prompt_tokens_details.cached_tokens // 0')
		[ -n "$worker" ] || worker=$(printf '%s' "$out" | jq -r '.system_fingerprint // ""')
	fi
	log "request $name -> worker ${worker:-?} (overlap ${overlap:-0}/${total:-0} blocks, cached_tokens $cached, fallback '${fallback}')"
	results+=("$(jq -cn --arg name "$name" --arg worker "$worker" --argjson overlap "${overlap:-0}" \
		--argjson total "${total:-0}" --argjson cached "$cached" --arg fallback "$fallback" \
		'{name: $name, worker: $worker, overlap_blocks: $overlap, total_blocks: $total, cached_tokens: $cached, fallback: $fallback}')")
}

q1='{"model":"kvroute-sim","messages":[{"role":"system","content":"You are a video analyst."},{"role":"user","content":"What happens in the first scene?"}],"max_tokens":8}'
q2='{"model":"kvroute-sim","messages":[{"role":"system","content":"You are a video analyst."},{"role":"user","content":"What happens in the first scene?"},{"role":"assistant","content":"A car drives by."},{"role":"user","content":"And then?"}],"max_tokens":8}'
q3='{"model":"kvroute-sim","messages":[{"role":"user","content":"Summarize the clip in one sentence."}],"max_tokens":8}'
q4='{"model":"kvroute-sim","messages":[{"role":"user","content":"Describe the clip."}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}'
request text-first "$q1"
request text-followup "$q2"
request text-other "$q3"
request stream "$q4"

cleanup
trap - EXIT INT TERM
printf '{"requests":[%s]}\n' "$(IFS=,; echo "${results[*]}")"
