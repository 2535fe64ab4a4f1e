//go:build cgo && !kvroute_system_ffmpeg

package ffmpegpin

/*
#cgo pkg-config: libavcodec
#include <libavcodec/version.h>
#if LIBAVCODEC_VERSION_MAJOR < 61
#error "kvroute: pkg-config found an FFmpeg older than 7 (libavcodec < 61), probably the system's. go.mod's go-astiav v0.39.0 needs kvroute's FFmpeg 7.1.5: run `make deps` (builds it once), then export PKG_CONFIG_PATH=$(deps/ffmpeg/build.sh --print-prefix)/lib/pkgconfig, or build through make. For the system FFmpeg 5.1 of Debian 12 use -modfile=go.system.mod -tags=kvroute_system_ffmpeg. See docs/ffmpeg.md."
#endif
*/
import "C"
