// libwebp's advanced decoding API into caller memory (webp_libwebp.go).
#include <webp/decode.h>

#include "webp_libwebp.h"

int kv_webp_decode(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	int *channels, int lossless_only) {
	WebPDecoderConfig cfg;
	if (!WebPInitDecoderConfig(&cfg)) {
		return KV_WEBP_ERROR;
	}
	if (WebPGetFeatures(data, size, &cfg.input) != VP8_STATUS_OK) {
		return KV_WEBP_ERROR;
	}
	if (cfg.input.width != w || cfg.input.height != h) {
		return KV_WEBP_SIZE;
	}
	if (lossless_only && cfg.input.format != 2) {
		return KV_WEBP_LOSSY;
	}
	// A lossless image is decoded as RGBA whatever its header's alpha hint says: Go's decoder
	// keeps the alpha the pixels carry, and the caller finds out whether they are opaque. A lossy
	// one is RGBA when it has an ALPH chunk (Pillow's mode RGBA), else RGB.
	int ch = (cfg.input.has_alpha || cfg.input.format == 2) ? 4 : 3;
	cfg.output.colorspace = ch == 4 ? MODE_RGBA : MODE_RGB;
	cfg.output.is_external_memory = 1;
	cfg.output.u.RGBA.rgba = out;
	cfg.output.u.RGBA.stride = w * ch;
	cfg.output.u.RGBA.size = (size_t)w * (size_t)h * (size_t)ch;
	VP8StatusCode st = WebPDecode(data, size, &cfg);
	WebPFreeDecBuffer(&cfg.output);
	if (st != VP8_STATUS_OK) {
		return KV_WEBP_ERROR;
	}
	*channels = ch;
	return KV_WEBP_OK;
}
