"""The buffer resource (V#) words 1 and 3 as the CDNA/GFX9 layout defines them,
written independently of the emulator's own field table, and the descriptor
cases generated from it: every value of every checked field of up to 6 bits,
each single bit (and all bits) of a wider one, and each bit of the fields the
checker must leave free. A checker that reads a field one bit too narrow or
too wide, or accepts a reserved value, disagrees with some case.

Layout: gem5's Vega model (`BufferRsrcDescriptor`: numFmt [14:12], dataFmt
[18:15], elemSize [20:19], idxStride [22:21], addTidEn [23], ..., type
[31:30]); values: LLVM's SIDefines.h (DFMT_INVALID = 0, DFMT_RESERVED_15,
NFMT_RESERVED_6 on GFX9) and MLIR's AMDGPUToROCDL (both format fields nonzero
for raw buffers; bits [29:24] and the type bits 0 on CDNA)."""

SHIPPED_WORD3 = 0x27000  # NUM_FORMAT 7 (FLOAT), DATA_FORMAT 4 (32): what the ladder's buffer kernels build
SHIPPED_WORD1 = 0x0000    # BASE_HI of a low address, stride 0, no swizzle


def _zero(v):
    return v == 0


def _any(v):
    return True


WORD1 = (  # (field, low bit, width, accepted?)
    ("BASE_HI", 0, 16, _any),
    ("STRIDE", 16, 14, _zero),
    ("CACHE_SWIZZLE/SWIZZLE_ENABLE", 30, 2, _zero),
)
WORD3 = (
    ("DST_SEL", 0, 12, _any),
    ("NUM_FORMAT", 12, 3, lambda v: v in (1, 2, 3, 4, 5, 7)),
    ("DATA_FORMAT", 15, 4, lambda v: 1 <= v <= 14),
    ("ELEMENT_SIZE", 19, 2, _zero),
    ("INDEX_STRIDE", 21, 2, _zero),
    ("ADD_TID_ENABLE", 23, 1, _zero),
    ("ATC/HASH/HEAP/MTYPE", 24, 6, _zero),
    ("TYPE", 30, 2, _zero),
)


def _covers_word(fields):
    bits = [b for _, low, width, _ in fields for b in range(low, low + width)]
    return sorted(bits) == list(range(32))


assert _covers_word(WORD1) and _covers_word(WORD3)


def _values(width):
    if width <= 6:
        return range(1 << width)
    return [0, (1 << width) - 1] + [1 << b for b in range(width)]


def cases():
    """[(word index, word value, accepted, label)]: one field changed from the shipped word."""
    out = []
    for index, fields, shipped in ((1, WORD1, SHIPPED_WORD1), (3, WORD3, SHIPPED_WORD3)):
        for name, low, width, ok in fields:
            mask = ((1 << width) - 1) << low
            for v in _values(width):
                word = (shipped & ~mask) | (v << low)
                out.append((index, word, ok(v), f"word{index} {name} = {v} (0x{word:08x})"))
    return out


def every_bit_exercised():
    """Each bit of each checked field is, in some case pair, the only bit
    between an accepted and a refused word."""
    by_word = {}
    for index, word, ok, _ in cases():
        by_word.setdefault(index, {})[word] = ok
    missing = []
    for index, fields in ((1, WORD1), (3, WORD3)):
        verdict = by_word[index]
        for name, low, width, ok in fields:
            if ok is _any:
                continue
            for b in range(low, low + width):
                if not any(ok_w and verdict.get(w ^ (1 << b)) is False for w, ok_w in verdict.items()):
                    missing.append(f"word{index} {name} bit {b}")
    return missing


def disagreements(check, error_type):
    """[(case label, what went wrong)] where check(words) (raising error_type
    to refuse) and the layout disagree; a refusal must name the field. Word 2
    (NUM_RECORDS) is 0, so no allocation is looked up."""
    out = []
    for index, word, ok, label in cases():
        words = [0, SHIPPED_WORD1, 0, SHIPPED_WORD3]
        words[index] = word
        try:
            check(tuple(words))
            refused = None
        except error_type as e:
            refused = str(e)
        field = label.split(" = ")[0].split(" ", 1)[1]
        if ok and refused is not None:
            out.append((label, f"refused ({refused[:120]})"))
        elif not ok and refused is None:
            out.append((label, "accepted"))
        elif not ok and f" {field} " not in refused:
            out.append((label, f"refused for another field ({refused[:120]})"))
    return out
