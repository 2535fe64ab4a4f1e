// A JPEG decoder over libjpeg-turbo (Debian's libjpeg62-turbo-dev, linked statically), decoding
// as Pillow does: 8-bit samples, JDCT_ISLOW, fancy upsampling, RGB output (jpeg_turbo.go).
#ifndef KVROUTE_JPEG_TURBO_H
#define KVROUTE_JPEG_TURBO_H

#define KV_JPEG_OK 0
#define KV_JPEG_ERROR 1       // libjpeg refused the data: msg holds its words
#define KV_JPEG_TRUNCATED 2   // the data ended before the image (Pillow: "image file is truncated")
#define KV_JPEG_OTHER_SPACE 3 // not Gray, YCbCr or RGB (CMYK, YCCK): decoded by Go instead
#define KV_JPEG_SIZE 4        // the header's size is not the expected one

int kv_jpeg_decode_rgb(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	char *msg, int msglen);

#endif
