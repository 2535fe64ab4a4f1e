// A PNG decoder over libpng (Debian's libpng-dev, its static libpng16.a over zlib's libz.a),
// giving the 8-bit samples Go's image/png gives (png_libpng.go).
#ifndef KVROUTE_PNG_LIBPNG_H
#define KVROUTE_PNG_LIBPNG_H

#define KV_PNG_OK 0
#define KV_PNG_ERROR 1   // libpng refused the data (or warned): msg holds its words
#define KV_PNG_DEEP 2    // 16-bit samples: decoded by Go instead
#define KV_PNG_SIZE 3    // the header's size is not the expected one

// kv_png_decode decodes data into out (w*h*4 bytes): packed rows of *channels (3: RGB, the PNG
// has no alpha channel and no tRNS; 4: straight RGBA) bytes per pixel.
int kv_png_decode(const unsigned char *data, unsigned long size, unsigned char *out, int w, int h,
	int *channels, char *msg, int msglen);

#endif
