#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <jpeglib.h>
#include <jerror.h>

#include "jpeg_turbo.h"

// kv_err is libjpeg's error manager with a way out: error_exit must not return (the default one
// calls exit()), so it jumps back to kv_jpeg_decode_rgb.
struct kv_err {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	int eof;
};

static void kv_error_exit(j_common_ptr c) {
	struct kv_err *e = (struct kv_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

// Warnings are counted, not printed; a premature end of the data is remembered.
static void kv_emit_message(j_common_ptr c, int level) {
	struct kv_err *e = (struct kv_err *)c->err;
	if (level < 0) {
		if (c->err->msg_code == JWRN_JPEG_EOF) {
			e->eof = 1;
		}
		c->err->num_warnings++;
	}
}

static void kv_output_message(j_common_ptr c) { (void)c; }

int kv_jpeg_decode_rgb(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	char *msg, int msglen) {
	struct jpeg_decompress_struct cinfo;
	struct kv_err err;
	memset(&err, 0, sizeof err);
	cinfo.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = kv_error_exit;
	err.pub.emit_message = kv_emit_message;
	err.pub.output_message = kv_output_message;
	if (setjmp(err.jb)) {
		jpeg_destroy_decompress(&cinfo);
		snprintf(msg, msglen, "%s", err.msg);
		return KV_JPEG_ERROR;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, data, size);
	jpeg_read_header(&cinfo, TRUE);
	if (cinfo.jpeg_color_space != JCS_GRAYSCALE && cinfo.jpeg_color_space != JCS_YCbCr &&
		cinfo.jpeg_color_space != JCS_RGB) {
		jpeg_destroy_decompress(&cinfo);
		return KV_JPEG_OTHER_SPACE;
	}
	cinfo.out_color_space = JCS_RGB;
	cinfo.dct_method = JDCT_ISLOW;
	cinfo.do_fancy_upsampling = TRUE;
	jpeg_start_decompress(&cinfo);
	if ((int)cinfo.output_width != w || (int)cinfo.output_height != h || cinfo.output_components != 3) {
		jpeg_destroy_decompress(&cinfo);
		return KV_JPEG_SIZE;
	}
	while (cinfo.output_scanline < cinfo.output_height && !err.eof) {
		JSAMPROW row = out + (size_t)cinfo.output_scanline * (size_t)w * 3;
		jpeg_read_scanlines(&cinfo, &row, 1);
	}
	if (err.eof) {
		jpeg_destroy_decompress(&cinfo);
		return KV_JPEG_TRUNCATED;
	}
	jpeg_finish_decompress(&cinfo);
	jpeg_destroy_decompress(&cinfo);
	return err.eof ? KV_JPEG_TRUNCATED : KV_JPEG_OK;
}
