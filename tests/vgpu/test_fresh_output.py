"""The virtual device's fresh outputs (VirtualGPU.fresh_output): what it holds may not depend on
when Python frees an output. Nothing keeps a fresh output alive and the device never sees it
freed, so these tests hand out the memory themselves, from one buffer they keep: an output's
memory is given again, overlapping the first one from below, from inside, and exactly, as the
allocator does once garbage collection has freed it (the order a full run once met by chance)."""

import pytest
import torch
import vgpu_support as S

N = 1024  # float32 elements of each output: one launch
F32 = torch.float32


def _relu_into(dev, x, out, name):
    import relu_flydsl

    dev.fresh_output(N * 4, name=name)
    relu_flydsl.relu(x, out=out)
    dev.check()
    return dev.memory.find(out.data_ptr())


def test_memory_of_a_freed_output_given_again_replaces_it(vgpu):
    xbits = S.make_bits("mixed", N, F32, seed=11)
    x, _ = S.guarded_input(vgpu, xbits, F32)
    arena = torch.empty(3 * N, dtype=F32)  # what the allocator hands out; never registered by the test
    # (start, name): each output's memory overlaps the one before, freed by then
    for start, name in ((N // 2, "y-first"), (0, "y-below"), (N // 4, "y-inside"), (N // 4, "y-same")):
        out = arena[start:start + N]
        region = _relu_into(vgpu, x, out, name)
        assert (region.name, region.base, region.size) == (name, out.data_ptr(), N * 4), region
        assert vgpu._fresh is None, f"{name}: the declaration was not met by its launch"
        S.assert_bits(out, S.relu_bits(xbits, F32))
        S.assert_written_once(vgpu, out)
        fresh = [r.name for r in vgpu.memory.regions if r.name.startswith("y-")]
        assert fresh == [name], f"freed outputs still held beside {name}: {fresh}"


def test_a_fresh_output_does_not_replace_live_memory(vgpu):
    """Only fresh outputs are replaced: memory the test registered (kept alive by the region) is
    never handed out again, so an output overlapping it is the device's error, as before."""
    import relu_flydsl

    xbits = S.make_bits("mixed", N, F32, seed=12)
    x, _ = S.guarded_input(vgpu, xbits, F32)
    arena = torch.empty(3 * N, dtype=F32)
    vgpu.register(arena[N:2 * N], name="live")
    vgpu.fresh_output(N * 4, name="y")
    vgpu.errors_expected = True
    with pytest.raises(RuntimeError, match="launch failed"):
        relu_flydsl.relu(x, out=arena[N // 2:N // 2 + N])
    assert any("region y" in str(e) and "overlaps live" in str(e) for e in vgpu.errors), vgpu.errors
    assert [r.name for r in vgpu.memory.regions if r.name in ("live", "y")] == ["live"]
