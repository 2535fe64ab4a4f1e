// Package media decodes VP8 and VP9 video at the edge and computes its content identity
// (DESIGN.md §1.3, §3, §6). Fetching lives in media/fetch.
//
// The decoder runs go-astiav v0.39.0 over kvroute's own static FFmpeg 7.1.5 (the default:
// deps/ffmpeg, go.mod, docs/ffmpeg.md), or go-astiav v0.16.0 over Debian 12's system FFmpeg 5.1
// (FFMPEG=system: go.system.mod, tag kvroute_system_ffmpeg; FFMPEG_PIN=8.1 selects FFmpeg 8.1.2 with
// go-astiav v0.42.0, whose RGB bytes differ); the code compiles against all three. Plus a small cgo shim (shim.c) for what go-astiav lacks: the confinement of every
// format context (demuxer, protocol and decoder allow-lists, an io_open refusing nested opens;
// manifests are refused before FFmpeg sees them, manifest.go), avformat_find_stream_info with per-stream options (max_pixels on the probing
// decoders), av_find_best_stream, av_force_cpu_flags, and swscale set up exactly as ffmpeg's scale
// filter does (flags bilinear+accurate_rnd+bitexact+full_chroma_int, MPEG-2 chroma siting for
// yuv420p, the frame's own colour matrix and range, BT.601 when unspecified).
//
// Flow of Decoder.Decode for one clip held in memory (custom AVIO over the byte slice, no files):
//
//  1. Demux and probe: best video stream ignoring attached pictures; another codec is
//     unsupported_codec, several real video streams multi_stream, a display matrix rotation, a
//     container frame size over the cap frame_too_large.
//  2. Decode every packet after checking the frame sizes its VP8/VP9 headers declare
//     (frame_too_large before the decoder sees it; the decoder also runs with max_pixels), drain
//     after every packet and flush at EOF. Frame size changes are resolution_change. Limits:
//     decoded frames (frame_limit), sampled RGB bytes (frame_limit), wall time and decode slots
//     (decode_timeout).
//  3. The total frame count is the decoded (presentable) count. When the container announces one
//     (nb_frames, else duration × fps), the sampler's frames for that count are converted during
//     the counting pass; a second pass runs only when the decoded count differs and the new
//     selection needs other frames. Only the selected frames are ever held.
//  4. Identity: XXH3-64 over the shape, the metadata JSON and the packed rgb24 frames (Identity).
//
// Identify adds an LRU decode cache keyed by XXH3-128 of the bytes and the sampler parameters.
// All errors carry reason codes (reason.CodeOf). Measured: the rgb24 bytes are identical with
// FFmpeg's SIMD on and off, and equal ffmpeg 5.1's CLI for every golden vector.
package media
