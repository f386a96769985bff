"""relu_flydsl._hip looks for the loaded HIP runtime on each use until it
finds one: a runtime loaded after a miss (a stand-in a test loads, a library
imported later) is found and bound, and then kept. The runtime is presented
through _hip._find_loaded (what a process has mapped), so the answer does not
depend on what an earlier test loaded."""

from types import SimpleNamespace

from relu_flydsl import _hip

_BOUND = ("hipGetDevice", "hipSetDevice", "hipGetDeviceCount", "hipModuleLoadData", "hipModuleUnload",
          "hipModuleGetFunction", "hipGetLastError", "hipModuleLaunchKernel")


def _runtime():
    """A HIP runtime as _bind sees one: the symbols it binds (no capture API)."""
    return SimpleNamespace(**{name: SimpleNamespace() for name in _BOUND})


def test_a_runtime_loaded_after_a_miss_is_found(monkeypatch):
    monkeypatch.setattr(_hip, "_lib", None)
    mapped = []  # the runtimes "loaded in this process"
    monkeypatch.setattr(_hip, "_find_loaded", lambda: mapped[0] if mapped else None)
    assert _hip.unavailable() == _hip.MISSING
    assert _hip.unavailable() == _hip.MISSING  # asked again: still none
    mapped.append(_runtime())
    assert _hip.unavailable() is None
    assert _hip.lib() is mapped[0]


def test_a_found_runtime_is_kept(monkeypatch):
    monkeypatch.setattr(_hip, "_lib", None)
    first = _runtime()
    monkeypatch.setattr(_hip, "_find_loaded", lambda: first)
    assert _hip.lib() is first
    monkeypatch.setattr(_hip, "_find_loaded", lambda: None)  # not looked up again
    assert _hip.unavailable() is None and _hip.lib() is first
