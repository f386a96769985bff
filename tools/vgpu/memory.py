"""Device memory of the virtual gfx950: host memory, checked against live allocations.

Every access the emulator makes goes through `Memory.read` / `Memory.write`
with per-lane addresses. An access must lie wholly inside one registered region:
- outside every region: the launch stops (the memory may not even exist) and
  the violation names the instruction, wave, lane and address;
- inside a *guard* region (sentinel memory around a tensor): the access is
  performed (so the sentinel check sees a write) and recorded as a violation;
- a write into a read-only region (the kernarg segment) is a violation.
Writes are counted per byte so a test can assert each output element was
written exactly once.
"""

import ctypes
from dataclasses import dataclass

import numpy as np


class OutOfBounds(Exception):
    pass


@dataclass
class Region:
    base: int
    size: int
    name: str
    writable: bool = True
    guard: bool = False
    owner: object = None  # keeps the backing object alive
    fresh: bool = False  # a fresh_output(): nothing keeps it alive, its memory may be handed out again
    _bytes: np.ndarray = None
    _writes: np.ndarray = None

    @property
    def end(self):
        return self.base + self.size

    @property
    def bytes(self):
        if self._bytes is None:
            self._bytes = np.ctypeslib.as_array((ctypes.c_uint8 * max(self.size, 1)).from_address(self.base))[: self.size]
        return self._bytes

    @property
    def writes(self):
        if self._writes is None:
            self._writes = np.zeros(self.size, dtype=np.uint16)
        return self._writes


@dataclass
class Violation:
    kind: str          # "unmapped", "guard-read", "guard-write", "read-only", "misaligned"
    instruction: str
    pc: int
    wave: int
    lane: int
    address: int
    size: int
    region: str = ""

    def __str__(self):
        where = f" ({self.region})" if self.region else ""
        return (f"{self.kind}: {self.size}-byte access at 0x{self.address:x}{where} by wave {self.wave} "
                f"lane {self.lane} at pc 0x{self.pc:x}: {self.instruction}")


class Memory:
    def __init__(self):
        self.regions = []
        self._sorted = None
        self.violations = []

    # ------------------------------------------------------------ registry
    def add(self, base, size, name, writable=True, guard=False, owner=None, fresh=False):
        base, size = int(base), int(size)
        for r in self.regions:
            if base < r.end and r.base < base + size:
                raise ValueError(f"region {name} [0x{base:x}, +{size}) overlaps {r.name}")
        r = Region(base, size, name, writable, guard, owner, fresh)
        self.regions.append(r)
        self._sorted = None
        return r

    def remove(self, region):
        self.regions = [r for r in self.regions if r is not region]
        self._sorted = None

    def clear(self):
        self.regions = []
        self._sorted = None
        self.violations = []

    def find(self, addr):
        for r in self.regions:
            if r.base <= addr < r.end:
                return r
        return None

    def _index(self):
        if self._sorted is None:
            rs = sorted(self.regions, key=lambda r: r.base)
            self._sorted = (rs, np.array([r.base for r in rs], dtype=np.uint64),
                            np.array([r.end for r in rs], dtype=np.uint64))
        return self._sorted

    # ------------------------------------------------------------ access
    def _resolve(self, addr, nbytes, ctx, write):
        """addr: uint64 [N]. Returns (list of (region, lane mask), split mask):
        `split` marks accesses that run from one region into the adjacent one
        (recorded as a violation; performed byte by byte by the caller). Raises
        OutOfBounds when any byte is outside every region."""
        rs, bases, ends = self._index()
        if not rs:
            ridx = np.full(addr.shape, -1)
        else:
            ridx = np.searchsorted(bases, addr, side="right").astype(np.int64) - 1
        ok = ridx >= 0
        safe = np.where(ok, ridx, 0)
        split = np.zeros(addr.shape, bool)
        if rs:
            inside = addr + np.uint64(nbytes) <= ends[safe]
            split = ok & ~inside
            ok &= inside
        for k in np.flatnonzero(split):
            a = int(addr[k])
            if any(self.find(a + j) is None for j in range(nbytes)):
                split[k] = False  # part of it is unmapped
        if not (ok | split).all():
            bad = int(np.flatnonzero(~(ok | split))[0])
            a = int(addr[bad])
            r = self.find(a)
            v = ctx.violation("unmapped", bad, a, nbytes, r.name if r else "")
            self.violations.append(v)
            raise OutOfBounds(str(v))
        for k in np.flatnonzero(split)[:16]:
            a = int(addr[k])
            names = "->".join(dict.fromkeys(self.find(a + j).name for j in range(nbytes)))
            self.violations.append(ctx.violation("straddles-region-end", int(k), a, nbytes, names))
        out = []
        if ok.any():
            live = ridx[ok]
            lo, hi = int(live.min()), int(live.max())
            for k in ([lo] if lo == hi else np.unique(live)):
                r = rs[int(k)]
                m = ok & (ridx == k)
                if r.guard or (write and not r.writable):
                    bad = int(np.flatnonzero(m)[0])
                    kind = ("read-only" if (write and not r.writable and not r.guard)
                            else ("guard-write" if write else "guard-read"))
                    self.violations.append(ctx.violation(kind, bad, int(addr[bad]), nbytes, r.name))
                    if kind == "read-only":
                        raise OutOfBounds(str(self.violations[-1]))
                out.append((r, m))
        return out, split

    def _bytewise(self, ctx, split):
        """A context whose lanes are the bytes of the split accesses."""
        class Sub:
            def __init__(s, n):
                s.n = n

            def violation(s, kind, k, addr, size, region=""):
                return ctx.violation(kind, int(np.flatnonzero(split)[k // s.n]), addr, size, region)
        return Sub

    def read(self, addr, nbytes, ctx):
        """Read `nbytes` (1, 2 or a multiple of 4) at each address -> uint32 [N, max(1, nbytes//4)]."""
        addr = np.asarray(addr, dtype=np.uint64)
        words = max(1, nbytes // 4)
        out = np.zeros((addr.size, words), dtype=np.uint32)
        if addr.size == 0:
            return out
        regions, split = self._resolve(addr, nbytes, ctx, False)
        if split.any():
            sub = self._bytewise(ctx, split)(nbytes)
            baddr = (addr[split][:, None] + np.arange(nbytes, dtype=np.uint64)).ravel()
            b = self.read(baddr, 1, sub)[:, 0].astype(np.uint8).reshape(-1, nbytes)
            pad = np.zeros((b.shape[0], words * 4), np.uint8)
            pad[:, :nbytes] = b
            out[split] = pad.view("<u4")
        for r, m in regions:
            offs = (addr[m] - np.uint64(r.base)).astype(np.int64)
            if nbytes % 4 == 0 and not (offs & 3).any() and r.base % 4 == 0:
                w = r.bytes[: r.size // 4 * 4].view(np.uint32)
                out[m] = w[(offs >> 2)[:, None] + np.arange(words)]
            else:
                b = r.bytes[offs[:, None] + np.arange(nbytes)]
                if nbytes == 1:
                    out[m, 0] = b[:, 0]
                elif nbytes == 2:
                    out[m, 0] = b.copy().view("<u2")[:, 0]
                else:
                    out[m] = b.copy().view("<u4")
        return out

    def write(self, addr, nbytes, data, ctx):
        """Write the low `nbytes` of data (uint32 [N, words]) at each address."""
        addr = np.asarray(addr, dtype=np.uint64)
        if addr.size == 0:
            return
        data = np.ascontiguousarray(data, dtype=np.uint32)
        regions, split = self._resolve(addr, nbytes, ctx, True)
        if split.any():
            sub = self._bytewise(ctx, split)(nbytes)
            baddr = (addr[split][:, None] + np.arange(nbytes, dtype=np.uint64)).ravel()
            src = np.zeros((int(split.sum()), 4 * max(1, data.shape[1])), np.uint8)
            src[:, :data.shape[1] * 4] = data[split].view(np.uint8).reshape(-1, data.shape[1] * 4)
            self.write(baddr, 1, src[:, :nbytes].reshape(-1, 1).astype(np.uint32), sub)
        for r, m in regions:
            offs = (addr[m] - np.uint64(r.base)).astype(np.int64)
            idx = offs[:, None] + np.arange(nbytes)
            if nbytes >= 4:
                src = data[m].view(np.uint8).reshape(-1, data.shape[1] * 4)[:, :nbytes]
            else:
                src = data[m][:, :1].view(np.uint8).reshape(-1, 4)[:, :nbytes]
            r.bytes[idx] = src
            flat = idx.ravel()
            if flat.size * 8 > r.size:
                r.writes[:] += np.bincount(flat, minlength=r.size).astype(np.uint16)
            else:
                np.add.at(r.writes, flat, 1)
