// Package ffmpegpin stops a build against the wrong FFmpeg with one clear message (issue 24,
// docs/ffmpeg.md "Building without the Makefile").
//
// kvroute's default build links its own static FFmpeg 7.1.5 (deps/ffmpeg/build.sh) through
// go-astiav v0.39.0 (go.mod), found by pkg-config through PKG_CONFIG_PATH, which the Makefile and
// xcaddy/build.sh export. A plain `go build ./...` without it finds whatever FFmpeg the system
// has; on Debian 12 that is 5.1 (libavcodec 59), against whose headers go-astiav v0.39.0 fails
// with cgo errors that do not name the cause. This package's cgo preamble (check.go) fails
// with an #error that does. It has no dependencies, so the go command compiles it even when
// go-astiav fails, and media imports it so every build that links FFmpeg includes it.
//
// The system-FFmpeg build (FFMPEG=system: go.system.mod, go-astiav v0.16.0, tag
// kvroute_system_ffmpeg) leaves check.go out.
package ffmpegpin
