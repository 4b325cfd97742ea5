#!/usr/bin/env python3
"""Counts pixels of given colours in a PNG (8-bit RGB or RGBA, not interlaced),
decoded with zlib alone: the browser test's check that a chart was drawn.

  png_colours.py FILE.png RRGGBB...

prints "RRGGBB COUNT XMIN YMIN XMAX YMAX" per colour (-1s when absent) and
"size W H" first. Exit 1 if the file is not such a PNG.
"""
import struct
import sys
import zlib


def decode(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, colour, interlace))
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        ftype, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, bpp, rows


def main():
    try:
        with open(sys.argv[1], "rb") as f:
            width, height, bpp, rows = decode(f.read())
    except (OSError, ValueError, zlib.error, TypeError, struct.error) as e:
        print("png_colours.py: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    wanted = {bytes.fromhex(c): [0, width, height, -1, -1] for c in sys.argv[2:]}
    for y, line in enumerate(rows):
        for x in range(width):
            px = bytes(line[x * bpp:x * bpp + 3])
            w = wanted.get(px)
            if w is not None:
                w[0] += 1
                w[1], w[2], w[3], w[4] = min(w[1], x), min(w[2], y), max(w[3], x), max(w[4], y)
    print("size %d %d" % (width, height))
    for c in sys.argv[2:]:
        n, x0, y0, x1, y1 = wanted[bytes.fromhex(c)]
        print("%s %d %d %d %d %d" % (c, n, x0 if n else -1, y0 if n else -1, x1, y1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
