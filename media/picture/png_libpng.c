// libpng's sequential reader from memory with the transformations that give Go's image/png
// samples at 8 bits (png_libpng.go says which). Every libpng error and warning ends the decode
// with KV_PNG_ERROR: the caller then lets Go's decoder decide, so this path never accepts a file
// Go's would refuse because libpng is lenient about it.
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "png_libpng.h"

struct kv_png_src {
	const unsigned char *data;
	size_t size, off;
	char *msg;
	int msglen;
};

static void kv_png_read(png_structp p, png_bytep buf, size_t n) {
	struct kv_png_src *s = (struct kv_png_src *)png_get_io_ptr(p);
	if (n > s->size - s->off) {
		png_error(p, "the data ends before the image does");
	}
	memcpy(buf, s->data + s->off, n);
	s->off += n;
}

static void kv_png_error(png_structp p, png_const_charp m) {
	struct kv_png_src *s = (struct kv_png_src *)png_get_error_ptr(p);
	if (s->msglen > 0 && s->msg[0] == 0) {
		strncpy(s->msg, m, s->msglen - 1);
		s->msg[s->msglen - 1] = 0;
	}
	png_longjmp(p, 1);
}

// a warning is an error here (see above)
static void kv_png_warn(png_structp p, png_const_charp m) { kv_png_error(p, m); }

int kv_png_decode(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	int *channels, char *msg, int msglen) {
	struct kv_png_src src = {data, size, 0, msg, msglen};
	if (msglen > 0) {
		msg[0] = 0;
	}
	png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, kv_png_error, kv_png_warn);
	if (!p) {
		return KV_PNG_ERROR;
	}
	png_infop info = png_create_info_struct(p);
	png_bytep *rows = NULL;
	volatile int rc = KV_PNG_ERROR;
	if (!info || setjmp(png_jmpbuf(p))) {
		free(rows);
		png_destroy_read_struct(&p, info ? &info : NULL, NULL);
		return rc;
	}
	png_set_read_fn(p, &src, kv_png_read);
	png_set_benign_errors(p, 0);
	png_set_crc_action(p, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
	png_set_user_limits(p, 16384, 16384);
	png_read_info(p, info);
	png_uint_32 pw, ph;
	int depth, ct, il;
	png_get_IHDR(p, info, &pw, &ph, &depth, &ct, &il, NULL, NULL);
	if ((int)pw != w || (int)ph != h) {
		rc = KV_PNG_SIZE;
		png_longjmp(p, 1);
	}
	if (depth == 16) {
		rc = KV_PNG_DEEP;
		png_longjmp(p, 1);
	}
	int alpha = (ct & PNG_COLOR_MASK_ALPHA) || png_get_valid(p, info, PNG_INFO_tRNS);
	if (ct == PNG_COLOR_TYPE_PALETTE) {
		png_set_palette_to_rgb(p);
	}
	if (ct == PNG_COLOR_TYPE_GRAY && depth < 8) {
		png_set_expand_gray_1_2_4_to_8(p);
	}
	if (png_get_valid(p, info, PNG_INFO_tRNS)) {
		png_set_tRNS_to_alpha(p);
	}
	if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) {
		png_set_gray_to_rgb(p);
	}
	png_set_interlace_handling(p);
	png_read_update_info(p, info);
	int ch = alpha ? 4 : 3;
	if ((int)png_get_rowbytes(p, info) != w * ch) {
		png_error(p, "unexpected row size after the transformations");
	}
	rows = malloc(sizeof(png_bytep) * (size_t)h);
	if (!rows) {
		png_error(p, "out of memory");
	}
	for (int y = 0; y < h; y++) {
		rows[y] = out + (size_t)y * (size_t)w * (size_t)ch;
	}
	png_read_image(p, rows);
	png_read_end(p, NULL);
	free(rows);
	png_destroy_read_struct(&p, &info, NULL);
	*channels = ch;
	return KV_PNG_OK;
}
