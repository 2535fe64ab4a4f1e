// Small C helpers for the calls go-astiav does not expose (DESIGN.md §3, §6).
#ifndef KVROUTE_MEDIA_SHIM_H
#define KVROUTE_MEDIA_SHIM_H

#include <stdint.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>

// kv_find_stream_info runs avformat_find_stream_info with max_pixels and threads set on the probing
// decoder of every stream, so probing never allocates a frame over max_pixels.
int kv_find_stream_info(AVFormatContext *fc, int64_t max_pixels, int threads);

// kv_real_video_streams counts the video streams that are not attached pictures and returns the
// index of the first one in *first (-1 when none).
int kv_real_video_streams(AVFormatContext *fc, int *first);

// kv_best_video_stream is av_find_best_stream(fc, VIDEO, -1, -1, NULL, 0).
int kv_best_video_stream(AVFormatContext *fc);

// kv_is_attached_pic reports whether stream idx carries AV_DISPOSITION_ATTACHED_PIC.
int kv_is_attached_pic(AVFormatContext *fc, int idx);

// kv_nb_streams returns fc->nb_streams (used to check the pointer taken from go-astiav).
int kv_nb_streams(AVFormatContext *fc);

// kv_real_video_codecs counts the real (not attached picture) video streams known now and, in
// *allowed, those whose codec id is one of ids[0..n); *first_id is the first one's codec id.
int kv_real_video_codecs(AVFormatContext *fc, const int *ids, int n, int *allowed, int *first_id);

// kv_declared_video_size returns the largest width and height the real video streams' headers
// declare (0 when unknown), read before any decoder runs.
int kv_declared_video_size(AVFormatContext *fc, int *w, int *h);

// kv_size_guard refuses a picture size over max_w×max_h in the decoder's get_format callback,
// before the picture is allocated (h264, hevc); kv_size_guard_install sets avctx->opaque and
// avctx->get_format (before avcodec_open2); kv_size_guard_refused reports the first refused size.
// Free the guard after the codec context.
typedef struct kv_size_guard kv_size_guard;
kv_size_guard *kv_size_guard_install(AVCodecContext *avctx, int max_w, int max_h);
int kv_size_guard_refused(kv_size_guard *g, int *w, int *h);
void kv_size_guard_free(kv_size_guard *g);

// kv_interrupt_install sets fc's interrupt callback to read a flag it allocates; kv_interrupt
// raises the flag (any thread); kv_interrupt_free frees it after the context is closed.
int *kv_interrupt_install(AVFormatContext *fc);
void kv_interrupt(int *flag);
void kv_interrupt_free(int *flag);

// kv_mem_io is a read-only, seekable AVIOContext over a caller-owned byte range. It replaces
// go-astiav's AllocIOContext, whose v0.16.0 handler map keeps every read callback (and the clip
// bytes it closes over) after Free. The bytes must stay valid (pinned) until kv_mem_io_free.
typedef struct kv_mem_io kv_mem_io;

// kv_mem_io_attach allocates a kv_mem_io over data[0:size] with a buffer of buf_size bytes and
// sets it as fc->pb (AVFMT_FLAG_CUSTOM_IO). A read returns AVERROR_EXIT once *stop is non-zero
// (stop may be NULL). NULL when out of memory.
kv_mem_io *kv_mem_io_attach(AVFormatContext *fc, const uint8_t *data, int64_t size, int buf_size, const int *stop);

// kv_mem_io_free frees the AVIOContext, its buffer and m; call after the format context is
// closed (avformat_close_input leaves a custom pb to its owner). NULL is a no-op.
void kv_mem_io_free(kv_mem_io *m);

// KV_DEMUXERS is the demuxer allow-list (DESIGN.md §6): Matroska/WebM, the MOV/MP4 family, IVF.
// A name matches any comma-separated part of a demuxer's name (av_match_list).
#define KV_DEMUXERS "matroska,webm,mov,mp4,m4a,3gp,3g2,mj2,ivf"
// KV_DECODERS is every decoder a probing or decoding context may ever open; the operator's codec
// allow-list (DecoderConfig.Codecs) narrows it per decoder: FFmpeg's native vp8, vp9, h264 and
// hevc decoders and libdav1d for AV1 (media/codecs.go).
#define KV_DECODERS "vp8,vp9,h264,hevc,libdav1d"

// kv_lock_down confines fc before avformat_open_input: the demuxer allow-list, an empty (not
// NULL: NULL means every protocol) protocol allow-list, the decoder allow-list for
// avformat_find_stream_info's probing decoders (decoders: comma-separated names, a subset of
// KV_DECODERS), and an io_open that refuses every nested open (manifests, playlists, external
// references). Returns 0 or a negative AVERROR.
int kv_lock_down(AVFormatContext *fc, const char *decoders);

// kv_nested_opens_refused is the number of nested opens kv_lock_down's io_open refused in this
// process (tests; a refusal is also logged by FFmpeg's logger on fc).
long kv_nested_opens_refused(void);

// kv_protocol_whitelist returns fc's protocol allow-list: "" after kv_lock_down, NULL when unset.
const char *kv_protocol_whitelist(AVFormatContext *fc);

// kv_open_dref_test opens data with the mov demuxer allowed and external data references
// enabled (enable_drefs, use_absolute_path), behind kv_lock_down's io_open: the test of the
// io_open layer alone. Returns avformat_open_input's result.
int kv_open_dref_test(const uint8_t *data, int64_t size);

// kv_stream_display_matrix copies stream idx's display matrix (coded side data, 9 int32) into
// out and returns 1, or returns 0 when the stream has none.
int kv_stream_display_matrix(AVFormatContext *fc, int idx, uint8_t out[36]);

// kv_frame_display_matrix is kv_stream_display_matrix for a decoded frame's side data.
int kv_frame_display_matrix(const AVFrame *f, uint8_t out[36]);

// kv_demuxer_name returns the name of the i-th demuxer of av_demuxer_iterate, NULL past the end.
const char *kv_demuxer_name(int i);

// kv_decoder_name returns the name of the i-th decoder of av_codec_iterate (decoders only,
// encoders skipped), NULL past the end.
const char *kv_decoder_name(int i);

void kv_force_cpu_flags(int flags);
int kv_get_cpu_flags(void);

typedef struct kv_scaler kv_scaler;

// kv_scaler_new builds the swscale context ffmpeg's scale filter builds for a frame of this size and
// format converted to rgb24 at the same size with the given flags. NULL on failure.
kv_scaler *kv_scaler_new(int w, int h, int format, int flags);

// kv_scale converts src to packed rgb24 rows (w*3 bytes each) in dst of dst_len bytes, setting the
// colour matrix and range from the frame as the scale filter does. Returns 0 or a negative AVERROR.
int kv_scale(kv_scaler *s, const AVFrame *src, uint8_t *dst, int64_t dst_len);

void kv_scaler_free(kv_scaler *s);

#endif
