#!/usr/bin/python3
"""Makes the lossy WebP fixtures of media/picture/webp_pillow_test.go and their golden pixel hashes.

Run in this folder with Debian 12's python3-pil (Pillow 9.4.0 over libwebp 1.2.4): /usr/bin/python3 make.py
The pictures are drawn from integer formulas (no randomness), encoded by Pillow's WebP encoder
(libwebp, lossy), then decoded by Pillow as vLLM loads an image (Image.open, load). golden.json holds
for each file the SHA-256 of the array kvroute's identity hashes: Pillow's convert("RGB") bytes
(H×W×3) when every pixel is opaque, else Pillow's straight RGBA bytes (H×W×4), kvroute's one alpha
rule (media/picture/pixels.go). white_rgb_sha256 is vLLM's rgba_to_rgb of it (alpha composite on
white), for the record.
"""
import hashlib
import json
import sys

from PIL import Image, features


def picture(w, h, alpha):
    mode = "RGBA" if alpha else "RGB"
    im = Image.new(mode, (w, h))
    px = []
    for y in range(h):
        for x in range(w):
            r = x * 255 // max(w - 1, 1)
            if w * h <= 1 << 20:  # small pictures get fine detail, the 4K one stays a few 100 kB
                r ^= (x * y) >> 7 & 0x3F
            g = (y * 255 // max(h - 1, 1) + ((x // 8 + y // 8) % 2) * 40) & 0xFF
            b = ((x + 2 * y) * 3 + (x * x + y * y) // 97) & 0xFF if w * h <= 1 << 20 else ((x // 96 + y // 54) * 37) & 0xFF
            if alpha:
                a = 255 if x < w // 4 else (y * 255 // max(h - 1, 1))
                px.append((r, g, b, a))
            else:
                px.append((r, g, b))
    im.putdata(px)
    return im


FIXTURES = [
    # name, width, height, alpha, quality
    ("opaque_333x197_q80", 333, 197, False, 80),
    ("opaque_64x48_q50", 64, 48, False, 50),
    ("opaque_1x1_q80", 1, 1, False, 80),
    ("opaque_17x3_q95", 17, 3, False, 95),
    ("alpha_333x197_q80", 333, 197, True, 80),
    ("alpha_31x9_q70", 31, 9, True, 70),
    ("opaque_3840x2160_q80", 3840, 2160, False, 80),
]


def identity_array(path, raw_out=None):
    im = Image.open(path)
    im.load()
    if im.mode == "RGBA" and im.getextrema()[3][0] < 255:
        data, ch = im.tobytes(), 4
        white = Image.new("RGB", im.size, (255, 255, 255))
        white.paste(im, mask=im.split()[3])
        white_sha = hashlib.sha256(white.tobytes()).hexdigest()
    else:
        data, ch = im.convert("RGB").tobytes(), 3
        white_sha = hashlib.sha256(data).hexdigest()
    assert len(data) == im.width * im.height * ch
    if raw_out:
        with open(raw_out + (".rgba" if ch == 4 else ".rgb"), "wb") as f:
            f.write(data)
    return {"width": im.width, "height": im.height, "mode": im.mode, "channels": ch,
            "sha256": hashlib.sha256(data).hexdigest(), "white_rgb_sha256": white_sha}


def main():
    import PIL
    assert features.version("webp") == "1.2.4", features.version("webp")
    golden = {"pillow": PIL.__version__, "libwebp": features.version("webp"), "files": {}}
    for name, w, h, alpha, q in FIXTURES:
        path = name + ".webp"
        picture(w, h, alpha).save(path, "WEBP", lossless=False, quality=q, method=4)
        golden["files"][path] = identity_array(path)
    # the ffmpeg-made lossy fixtures of testdata/image (testdata/SOURCE.md), their Pillow pixels
    # also kept raw (picture_lossy.rgb, picture_alpha_lossy.rgba: media/picture/imageformat_test.go)
    for path in ("picture_lossy.webp", "picture_alpha_lossy.webp"):
        golden["files"]["../" + path] = identity_array("../" + path, path[:-len(".webp")])
    with open("golden.json", "w") as f:
        json.dump(golden, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
