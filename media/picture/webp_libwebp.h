// A WebP decoder over libwebp (Debian's libwebp-dev, its static libwebp.a), webp_libwebp.go.
#ifndef KVROUTE_WEBP_LIBWEBP_H
#define KVROUTE_WEBP_LIBWEBP_H

#define KV_WEBP_OK 0
#define KV_WEBP_ERROR 1
#define KV_WEBP_SIZE 3
#define KV_WEBP_LOSSY 4 // a lossy (VP8) image and lossless_only: nothing decoded

// kv_webp_decode decodes data into out (w*h*4 bytes) as packed rows of *channels (3: RGB, no
// alpha in the file; 4: straight RGBA, always for a lossless image) bytes per pixel, with libwebp's
// default (fancy) chroma upsampling, Pillow's. With lossless_only a lossy image is not decoded (KV_WEBP_LOSSY).
int kv_webp_decode(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	int *channels, int lossless_only);

#endif
