#!/usr/bin/env python3
"""What a zstd dictionary trained per user would save on an index's segment columns.

Usage: scripts/segment-dictionary.py INDEX_DIR [COLUMN:LEVEL,...]

Reads every segment of each column of a maildex index (the LMDB environment folder,
opened read-only), splits it into its entries (docs/INDEX-FORMAT.md, "Segments"), and
compresses each segment's entries again: at the column's level as stored, then with a
dictionary of 16, 64 and 110 KiB trained on the column's first 2,000 entries. Prints the
bytes a message and the 4 KiB overflow pages each way. A measurement for
docs/BENCHMARKS.md ("What bounds LMTP's rate and the index's size"); it writes nothing.
Needs Debian's python3-lmdb and python3-zstandard.
"""

import sys
import time

import lmdb
import zstandard

# the compressed columns at their levels (`cache-sort` and `fts-sig` keep full segments raw,
# to be read in place; `cache-search` is packed, not in segments)
DEFAULT = "fts-text:3,headers:1,cache-envelope:1,cache-structure:1,cache-hot:1"
PAGE = 4096
DICTIONARY_SIZES = (16 * 1024, 64 * 1024, 110 * 1024)
SAMPLES = 2000


def varint(b, i):
    v, shift = 0, 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, i


def postcard_bytes(value):
    """The segment's postcard bytes: kind 0 raw, kind 1 length + zstd frame, kind 2 count
    + as kind 1."""
    kind = value[0]
    if kind == 0:
        return value[1:]
    body = value[1:]
    if kind == 2:
        _, i = varint(body, 0)
        body = body[i:]
    elif kind != 1:
        raise ValueError(f"segment kind {kind}")
    length = int.from_bytes(body[:4], "big")
    return zstandard.ZstdDecompressor().decompress(body[4:], max_output_size=length)


def entries(postcard):
    count, i = varint(postcard, 0)
    out = []
    for _ in range(count):
        _, i = varint(postcard, i)  # uid
        length, i = varint(postcard, i)
        out.append(postcard[i : i + length])
        i += length
    return out


def pages(n):
    """Overflow pages of a value of n bytes (LMDB's page header taken as 16 bytes)."""
    return (n + 16 + PAGE - 1) // PAGE


def measure(env, column, level):
    db = env.open_db(column.encode(), create=False)
    segments = []
    with env.begin(db=db) as txn:
        for _, value in txn.cursor():
            segments.append(entries(postcard_bytes(value)))
    every = [e for seg in segments for e in seg]
    plains = [b"".join(seg) for seg in segments]
    n = max(len(every), 1)
    plain = zstandard.ZstdCompressor(level=level)
    sizes = [len(plain.compress(p)) for p in plains]
    print(
        f"{column}: {len(every)} entries in {len(segments)} segments, "
        f"{sum(len(p) for p in plains) / n:.0f} B a message before compression"
    )
    print(f"  level {level}: {sum(sizes) / n:.0f} B a message, {sum(map(pages, sizes))} pages")
    for size in DICTIONARY_SIZES:
        start = time.monotonic()
        dictionary = zstandard.train_dictionary(size, every[:SAMPLES], level=level)
        took = time.monotonic() - start
        with_dict = zstandard.ZstdCompressor(
            level=level,
            dict_data=dictionary,
            write_dict_id=False,
            write_checksum=False,
        )
        sizes = [len(with_dict.compress(p)) for p in plains]
        print(
            f"  dictionary of {size // 1024} KiB: {sum(sizes) / n:.0f} B a message, "
            f"{sum(map(pages, sizes))} pages (trained in {took:.1f} s)"
        )


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=32, subdir=True)
    for spec in (sys.argv[2] if len(sys.argv) == 3 else DEFAULT).split(","):
        column, level = spec.split(":")
        measure(env, column, int(level))


if __name__ == "__main__":
    main()
