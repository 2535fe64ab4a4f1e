#include "shim.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <libavcodec/avcodec.h>
#include <libavutil/cpu.h>
#include <libavutil/dict.h>
#include <libavutil/opt.h>
#include <libavutil/pixfmt.h>
#include <libswscale/swscale.h>

int kv_find_stream_info(AVFormatContext *fc, int64_t max_pixels, int threads) {
	unsigned n = fc->nb_streams;
	AVDictionary **opts = NULL;
	int ret;
	if (n > 0) {
		opts = av_calloc(n, sizeof(*opts));
		if (!opts)
			return AVERROR(ENOMEM);
		for (unsigned i = 0; i < n; i++) {
			av_dict_set_int(&opts[i], "max_pixels", max_pixels, 0);
			av_dict_set_int(&opts[i], "threads", threads, 0);
		}
	}
	ret = avformat_find_stream_info(fc, opts);
	for (unsigned i = 0; i < n; i++)
		av_dict_free(&opts[i]);
	av_free(opts);
	return ret;
}

int kv_real_video_streams(AVFormatContext *fc, int *first) {
	int count = 0;
	*first = -1;
	for (unsigned i = 0; i < fc->nb_streams; i++) {
		AVStream *st = fc->streams[i];
		if (st->codecpar->codec_type != AVMEDIA_TYPE_VIDEO)
			continue;
		if (st->disposition & AV_DISPOSITION_ATTACHED_PIC)
			continue;
		if (*first < 0)
			*first = (int)i;
		count++;
	}
	return count;
}

int kv_real_video_codecs(AVFormatContext *fc, const int *ids, int n, int *allowed, int *first_id) {
	int count = 0;
	*allowed = 0;
	*first_id = AV_CODEC_ID_NONE;
	for (unsigned i = 0; i < fc->nb_streams; i++) {
		AVStream *st = fc->streams[i];
		if (st->codecpar->codec_type != AVMEDIA_TYPE_VIDEO || (st->disposition & AV_DISPOSITION_ATTACHED_PIC))
			continue;
		if (count++ == 0)
			*first_id = (int)st->codecpar->codec_id;
		for (int k = 0; k < n; k++)
			if ((int)st->codecpar->codec_id == ids[k]) {
				(*allowed)++;
				break;
			}
	}
	return count;
}

int kv_declared_video_size(AVFormatContext *fc, int *w, int *h) {
	*w = 0;
	*h = 0;
	for (unsigned i = 0; i < fc->nb_streams; i++) {
		AVStream *st = fc->streams[i];
		if (st->codecpar->codec_type != AVMEDIA_TYPE_VIDEO || (st->disposition & AV_DISPOSITION_ATTACHED_PIC))
			continue;
		if (st->codecpar->width > *w)
			*w = st->codecpar->width;
		if (st->codecpar->height > *h)
			*h = st->codecpar->height;
	}
	return 0;
}

struct kv_size_guard {
	int max_w, max_h;
	int refused_w, refused_h; // the first size refused, 0 until then
};

// kv_guard_get_format runs when the decoder (h264, hevc) has parsed a new sequence parameter set
// and before it allocates any picture for it: avctx->width/height are the new picture size then
// (h264_slice.c h264_init_ps: init_dimensions before get_pixel_format; hevcdec.c:
// export_stream_params before get_format, FFmpeg 5.1 and 7.1). AV_PIX_FMT_NONE makes the
// decoder refuse the slice, so a picture over the cap is never allocated.
static enum AVPixelFormat kv_guard_get_format(AVCodecContext *avctx, const enum AVPixelFormat *fmts) {
	kv_size_guard *g = avctx->opaque;
	if (g && (avctx->width > g->max_w || avctx->height > g->max_h)) {
		if (!__atomic_load_n(&g->refused_w, __ATOMIC_RELAXED)) {
			__atomic_store_n(&g->refused_h, avctx->height, __ATOMIC_RELAXED);
			__atomic_store_n(&g->refused_w, avctx->width, __ATOMIC_RELAXED);
		}
		return AV_PIX_FMT_NONE;
	}
	return avcodec_default_get_format(avctx, fmts);
}

kv_size_guard *kv_size_guard_install(AVCodecContext *avctx, int max_w, int max_h) {
	kv_size_guard *g = av_mallocz(sizeof(*g));
	if (!g)
		return NULL;
	g->max_w = max_w;
	g->max_h = max_h;
	avctx->opaque = g;
	avctx->get_format = kv_guard_get_format;
	return g;
}

int kv_size_guard_refused(kv_size_guard *g, int *w, int *h) {
	*w = __atomic_load_n(&g->refused_w, __ATOMIC_RELAXED);
	*h = __atomic_load_n(&g->refused_h, __ATOMIC_RELAXED);
	return *w != 0;
}

void kv_size_guard_free(kv_size_guard *g) { av_free(g); }

static int kv_interrupt_cb(void *opaque) { return __atomic_load_n((int *)opaque, __ATOMIC_RELAXED); }

int *kv_interrupt_install(AVFormatContext *fc) {
	int *flag = av_mallocz(sizeof(int));
	if (!flag)
		return NULL;
	fc->interrupt_callback.callback = kv_interrupt_cb;
	fc->interrupt_callback.opaque = flag;
	return flag;
}

void kv_interrupt(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELAXED); }

void kv_interrupt_free(int *flag) { av_free(flag); }

static long kv_refused;

static int kv_refuse_io_open(struct AVFormatContext *s, AVIOContext **pb, const char *url, int flags,
                             AVDictionary **options) {
	(void)flags;
	(void)options;
	__atomic_add_fetch(&kv_refused, 1, __ATOMIC_RELAXED);
	av_log(s, AV_LOG_WARNING, "kvroute refuses the nested open of \"%.200s\"\n", url ? url : "");
	*pb = NULL;
	return AVERROR(EPERM);
}

int kv_lock_down(AVFormatContext *fc, const char *decoders) {
	int ret;
	if ((ret = av_opt_set(fc, "format_whitelist", KV_DEMUXERS, 0)) < 0)
		return ret;
	if ((ret = av_opt_set(fc, "protocol_whitelist", "", 0)) < 0)
		return ret;
	if ((ret = av_opt_set(fc, "codec_whitelist", decoders, 0)) < 0)
		return ret;
	// av_opt_set stores "" as an empty string; a NULL list would allow every protocol.
	if (!fc->protocol_whitelist || fc->protocol_whitelist[0])
		return AVERROR_BUG;
	fc->io_open = kv_refuse_io_open;
	return 0;
}

long kv_nested_opens_refused(void) { return __atomic_load_n(&kv_refused, __ATOMIC_RELAXED); }

const char *kv_protocol_whitelist(AVFormatContext *fc) { return fc->protocol_whitelist; }

struct kv_mem_io {
	AVIOContext *pb;
	const uint8_t *data;
	int64_t size, pos;
	const int *stop;
};

static int kv_mem_read(void *opaque, uint8_t *buf, int buf_size) {
	kv_mem_io *m = opaque;
	if (m->stop && __atomic_load_n(m->stop, __ATOMIC_RELAXED))
		return AVERROR_EXIT;
	if (m->pos >= m->size)
		return AVERROR_EOF;
	int64_t n = m->size - m->pos;
	if (n > buf_size)
		n = buf_size;
	memcpy(buf, m->data + m->pos, (size_t)n);
	m->pos += n;
	return (int)n;
}

// kv_mem_seek follows the AVIOContext seek contract (libavformat/avio.h): AVSEEK_SIZE asks for the
// size; AVSEEK_FORCE is a hint and ignored; a position past the end is allowed (reads give EOF).
static int64_t kv_mem_seek(void *opaque, int64_t offset, int whence) {
	kv_mem_io *m = opaque;
	int64_t abs;
	if (whence & AVSEEK_SIZE)
		return m->size;
	switch (whence & ~AVSEEK_FORCE) {
	case SEEK_SET:
		abs = offset;
		break;
	case SEEK_CUR:
		abs = m->pos + offset;
		break;
	case SEEK_END:
		abs = m->size + offset;
		break;
	default:
		return AVERROR(EINVAL);
	}
	if (abs < 0)
		return AVERROR(EINVAL);
	m->pos = abs;
	return abs;
}

kv_mem_io *kv_mem_io_attach(AVFormatContext *fc, const uint8_t *data, int64_t size, int buf_size, const int *stop) {
	kv_mem_io *m = av_mallocz(sizeof(*m));
	if (!m)
		return NULL;
	m->data = data;
	m->size = size;
	m->stop = stop;
	uint8_t *buf = av_malloc(buf_size);
	if (!buf) {
		av_free(m);
		return NULL;
	}
	m->pb = avio_alloc_context(buf, buf_size, 0, m, kv_mem_read, NULL, kv_mem_seek);
	if (!m->pb) {
		av_free(buf);
		av_free(m);
		return NULL;
	}
	fc->pb = m->pb;
	fc->flags |= AVFMT_FLAG_CUSTOM_IO;
	return m;
}

void kv_mem_io_free(kv_mem_io *m) {
	if (!m)
		return;
	if (m->pb) {
		av_freep(&m->pb->buffer); // may have been replaced by a larger one (ffio_ensure_seekback)
		avio_context_free(&m->pb);
	}
	av_free(m);
}

int kv_best_video_stream(AVFormatContext *fc) {
	return av_find_best_stream(fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
}

int kv_is_attached_pic(AVFormatContext *fc, int idx) {
	if (idx < 0 || (unsigned)idx >= fc->nb_streams)
		return 0;
	return (fc->streams[idx]->disposition & AV_DISPOSITION_ATTACHED_PIC) != 0;
}

int kv_nb_streams(AVFormatContext *fc) { return (int)fc->nb_streams; }

void kv_force_cpu_flags(int flags) { av_force_cpu_flags(flags); }

int kv_get_cpu_flags(void) { return av_get_cpu_flags(); }

struct kv_scaler {
	struct SwsContext *sws;
	AVFrame *out;
	int w, h;
	int last_space, last_range;
};

kv_scaler *kv_scaler_new(int w, int h, int format, int flags) {
	kv_scaler *s = av_mallocz(sizeof(*s));
	if (!s)
		return NULL;
	s->w = w;
	s->h = h;
	s->last_space = -1;
	s->last_range = -1;
	s->sws = sws_alloc_context();
	if (!s->sws)
		goto fail;
	// The same options, in the same order, as libavfilter/vf_scale.c config_props (FFmpeg 5.1).
	av_opt_set_int(s->sws, "sws_flags", flags, 0);
	av_opt_set_int(s->sws, "threads", 1, 0);
	av_opt_set_int(s->sws, "srcw", w, 0);
	av_opt_set_int(s->sws, "srch", h, 0);
	av_opt_set_int(s->sws, "src_format", format, 0);
	av_opt_set_int(s->sws, "dstw", w, 0);
	av_opt_set_int(s->sws, "dsth", h, 0);
	av_opt_set_int(s->sws, "dst_format", AV_PIX_FMT_RGB24, 0);
	// MPEG-2 chroma siting for yuv420p, as the scale filter sets it (in_v_chr_pos default -513).
	av_opt_set_int(s->sws, "src_h_chr_pos", -513, 0);
	av_opt_set_int(s->sws, "src_v_chr_pos", format == AV_PIX_FMT_YUV420P ? 128 : -513, 0);
	av_opt_set_int(s->sws, "dst_h_chr_pos", -513, 0);
	av_opt_set_int(s->sws, "dst_v_chr_pos", -513, 0);
	if (sws_init_context(s->sws, NULL, NULL) < 0)
		goto fail;
	s->out = av_frame_alloc();
	if (!s->out)
		goto fail;
	s->out->width = w;
	s->out->height = h;
	s->out->format = AV_PIX_FMT_RGB24;
	if (av_frame_get_buffer(s->out, 0) < 0)
		goto fail;
	return s;
fail:
	kv_scaler_free(s);
	return NULL;
}

// colorspace_table mirrors parse_yuv_type("auto", colorspace) of libavfilter/vf_scale.c.
static const int *colorspace_table(int colorspace) {
	if (colorspace < 1 || colorspace > 10 || colorspace == 8)
		colorspace = AVCOL_SPC_BT470BG;
	return sws_getCoefficients(colorspace);
}

int kv_scale(kv_scaler *s, const AVFrame *src, uint8_t *dst, int64_t dst_len) {
	int row = s->w * 3;
	if (src->width != s->w || src->height != s->h)
		return AVERROR(EINVAL);
	if (dst_len < (int64_t)row * s->h)
		return AVERROR(EINVAL);
	if (src->colorspace != s->last_space || src->color_range != s->last_range) {
		int *inv_table, *table, in_full, out_full, brightness, contrast, saturation;
		if (sws_getColorspaceDetails(s->sws, &inv_table, &in_full, &table, &out_full,
		                             &brightness, &contrast, &saturation) < 0)
			return AVERROR(EINVAL);
		inv_table = (int *)colorspace_table(src->colorspace);
		table = inv_table;
		if (src->color_range != AVCOL_RANGE_UNSPECIFIED)
			in_full = src->color_range == AVCOL_RANGE_JPEG;
		sws_setColorspaceDetails(s->sws, inv_table, in_full, table, out_full,
		                         brightness, contrast, saturation);
		s->last_space = src->colorspace;
		s->last_range = src->color_range;
	}
	int ret = sws_scale(s->sws, (const uint8_t *const *)src->data, src->linesize, 0, s->h,
	                    s->out->data, s->out->linesize);
	if (ret < 0)
		return ret;
	if (ret != s->h)
		return AVERROR(EINVAL);
	for (int y = 0; y < s->h; y++)
		memcpy(dst + (int64_t)y * row, s->out->data[0] + (int64_t)y * s->out->linesize[0], row);
	return 0;
}

void kv_scaler_free(kv_scaler *s) {
	if (!s)
		return;
	if (s->sws)
		sws_freeContext(s->sws);
	av_frame_free(&s->out);
	av_free(s);
}

int kv_open_dref_test(const uint8_t *data, int64_t size) {
	AVFormatContext *fc = avformat_alloc_context();
	AVDictionary *opts = NULL;
	kv_mem_io *m;
	int ret;
	if (!fc)
		return AVERROR(ENOMEM);
	if ((ret = kv_lock_down(fc, KV_DECODERS)) < 0) {
		avformat_free_context(fc);
		return ret;
	}
	m = kv_mem_io_attach(fc, data, size, 4096, NULL);
	if (!m) {
		avformat_free_context(fc);
		return AVERROR(ENOMEM);
	}
	av_dict_set(&opts, "enable_drefs", "1", 0);
	av_dict_set(&opts, "use_absolute_path", "1", 0);
	ret = avformat_open_input(&fc, "", NULL, &opts);
	av_dict_free(&opts);
	if (ret >= 0)
		avformat_close_input(&fc);
	kv_mem_io_free(m);
	return ret;
}

int kv_stream_display_matrix(AVFormatContext *fc, int idx, uint8_t out[36]) {
	const AVCodecParameters *cp;
	const AVPacketSideData *sd;
	if (idx < 0 || (unsigned)idx >= fc->nb_streams)
		return 0;
#if LIBAVFORMAT_VERSION_MAJOR >= 61
	// FFmpeg 7+: stream side data lives in codecpar's coded side data.
	cp = fc->streams[idx]->codecpar;
	sd = av_packet_side_data_get(cp->coded_side_data, cp->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
	if (!sd || sd->size < 36)
		return 0;
	memcpy(out, sd->data, 36);
	return 1;
#else
	// FFmpeg 5.1 (Debian 12's system FFmpeg)
	size_t size = 0;
	const uint8_t *d = av_stream_get_side_data(fc->streams[idx], AV_PKT_DATA_DISPLAYMATRIX, &size);
	(void)cp;
	(void)sd;
	if (!d || size < 36)
		return 0;
	memcpy(out, d, 36);
	return 1;
#endif
}

int kv_frame_display_matrix(const AVFrame *f, uint8_t out[36]) {
	const AVFrameSideData *sd = av_frame_get_side_data(f, AV_FRAME_DATA_DISPLAYMATRIX);
	if (!sd || sd->size < 36)
		return 0;
	memcpy(out, sd->data, 36);
	return 1;
}

const char *kv_demuxer_name(int i) {
	void *it = NULL;
	const AVInputFormat *f;
	while ((f = av_demuxer_iterate(&it)))
		if (i-- == 0)
			return f->name;
	return NULL;
}

const char *kv_decoder_name(int i) {
	void *it = NULL;
	const AVCodec *c;
	while ((c = av_codec_iterate(&it)))
		if (av_codec_is_decoder(c) && i-- == 0)
			return c->name;
	return NULL;
}
