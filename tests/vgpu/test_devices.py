"""Every gfx950 of the process on two virtual devices, through the
public relu(): a tensor on device 1 while device 0 is current runs the kernel
on device 1 (its own module, its own stream) and leaves device 0 current;
threads using both devices alternately stay bit-exact with every launch on
the right device's stream."""

import threading

import pytest
import torch

import vgpu_support as S
from flash_relu_rocm.registry import RUNGS
from reference import SERVED as DTYPES  # the served dtypes (flash_relu_rocm/dtypes.py)

pytestmark = pytest.mark.vgpu


def _pkg():
    import relu_flydsl
    from relu_flydsl import _dispatch

    return relu_flydsl, _dispatch, _dispatch.STATE


@pytest.fixture
def two(vgpu):
    return S.two_devices(vgpu)


def _checked(dev, device, dtype, n, seed, rung=None):
    relu_flydsl = _pkg()[0]
    xbits = S.make_bits("mixed", n, dtype, seed)
    x, xbuf = dev.guarded((n,), dtype, name=f"x{seed}", device=device)
    x.copy_(S.to_tensor(xbits, dtype))
    out, obuf = dev.guarded((n,), dtype, name=f"out{seed}", device=device)
    assert relu_flydsl.relu(x, out=out, rung=rung) is out
    S.assert_bits(out, S.relu_bits(xbits, dtype))
    S.assert_guards(obuf, out)
    S.assert_guards(xbuf, x)
    assert (S.tensor_bits(x) == xbits).all()
    return x, out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tensor_on_device_1_while_device_0_is_current(two, dtype):
    relu_flydsl, dispatch, state = _pkg()
    loads = two.counts()["load"]
    name = str(dtype)[6:]
    for seed in (1, 2):  # the second call takes relu()'s fast path
        x, out = _checked(two, 1, dtype, 4096, seed)
        assert two.get_device() == 0, "the current device must be unchanged"
    assert relu_flydsl.dispatch_stats() == {f"flydsl/v5/{name}": 2}
    mine = [r for r in two.launches]
    assert len(mine) == 2 and all(r.device == 1 and r.stream == two.stream[1] for r in mine), mine
    assert all(r.device == 1 for r in two.canary_launches) and len(two.canary_launches) == 1
    vec = RUNGS["v5"].max_vec(name)
    assert dispatch.STATE.canary_runs == {("v5", name, vec, 1): 1}
    # device 1 got its own module of the shipped object, loaded with device 1 current
    assert two.counts()["load"] == loads + 1
    f1 = state.functions[("v5", name, vec, 1)]
    _checked(two, 0, dtype, 4096, 3)  # device 0 now: its own module, its own canary
    assert two.counts()["load"] == loads + 2
    assert state.functions[("v5", name, vec, 0)].value != f1.value
    assert dispatch.STATE.canary_runs == {("v5", name, vec, 1): 1, ("v5", name, vec, 0): 1}
    assert two.launches[-1].device == 0 and two.launches[-1].stream == two.stream[0]
    assert two.counts()["foreign_get_function"] == 0  # never touched a module off its device


def test_current_device_1_and_split_launches_on_device_0(two, monkeypatch):
    relu_flydsl, dispatch, _ = _pkg()
    from relu_flydsl.flash_relu_rocm import plan

    monkeypatch.setattr(plan, "LIMITS", plan.LaunchLimits(max_index=3000, max_buffer_bytes=6000))
    dispatch.STATE.reset()  # plans are cached per size: drop them
    two.set_device(1)
    for seed in (4, 5):
        _checked(two, 0, torch.bfloat16, 10240, seed)
        assert two.get_device() == 1
    assert len(two.launches) > 2 and all(r.device == 0 and r.stream == two.stream[0] for r in two.launches)
    dispatch.STATE.reset()


def test_threads_use_both_devices_alternately(two):
    relu_flydsl, dispatch, _ = _pkg()
    jobs = []
    for i in range(8):
        device, dtype = i % 2, DTYPES[i % len(DTYPES)]
        xbits = S.make_bits("mixed", 4096, dtype, 10 + i)
        x, _ = two.guarded((4096,), dtype, name=f"x{i}", device=device)
        x.copy_(S.to_tensor(xbits, dtype))
        out, obuf = two.guarded((4096,), dtype, name=f"out{i}", device=device)
        jobs.append((device, dtype, xbits, x, out, obuf))
    barrier = threading.Barrier(4)
    errors = []

    def work(t):
        try:
            two.set_device(t % 2)  # each thread has its own current device
            barrier.wait()
            for rnd in range(3):
                for device, dtype, xbits, x, out, obuf in jobs[t::4] + jobs[(t + 1) % 4::4]:
                    relu_flydsl.relu(x, out=out)
                    assert two.get_device() == t % 2
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    for device, dtype, xbits, x, out, obuf in jobs:
        S.assert_bits(out, S.relu_bits(xbits, dtype))
        S.assert_guards(obuf, out)
    by_x = {x.data_ptr(): device for device, _, _, x, _, _ in jobs}
    assert len(two.launches) == 4 * 3 * 4
    for r in two.launches:
        device = by_x[r.args[0]]
        assert r.device == device and r.stream == two.stream[device], (r.kernel, r.device, r.stream)
    assert set(dispatch.STATE.canary_runs.values()) == {1}
    assert {k[3] for k in dispatch.STATE.canary_runs} == {0, 1}
    stats = relu_flydsl.dispatch_stats()
    assert sum(stats.values()) == 4 * 3 * 4 and not any(k.startswith("fallback/") for k in stats), stats


def test_warmup_on_given_devices(two):
    relu_flydsl, dispatch, _ = _pkg()
    assert relu_flydsl.warmup("float32", devices=(0, 1)).ready == [("v5", "float32", 4, 0), ("v5", "float32", 4, 1)]
    assert dispatch.STATE.canary_runs == {("v5", "float32", 4, 0): 1, ("v5", "float32", 4, 1): 1}
    assert two.get_device() == 0
    canaries = len(two.canary_launches)
    _checked(two, 1, torch.float32, 4096, 20)
    assert len(two.canary_launches) == canaries and len(two.launches) == 1 and two.launches[0].device == 1
