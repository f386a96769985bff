"""relu_flydsl in a transformers model, as docs/serving.md's "Use it in transformers" shows it.

The page's `use_flydsl_relu` (taken from its block itself, so the two cannot
drift) is run here against this checkout's package on a tiny random OPT with ReLU
activations (no weights downloaded, no network): logits bit-identical to the unmodified
model on CPU, on the virtual gfx950 (the FlyDSL kernel runs: dispatch_stats), and compiled.
"""

import ast
import copy
import re
from pathlib import Path

import pytest
import torch

import relu_flydsl
from reference import INT_VIEW  # the integer view of each dtype (flash_relu_rocm/dtypes.py)

transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements.txt pins it)")

ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/serving.md"
SECTION = "## Use it in transformers"
FUNCTION = "use_flydsl_relu"


def readme_function():
    """use_flydsl_relu as docs/serving.md defines it, bound to this checkout's relu_flydsl."""
    text = (ROOT / PAGE).read_text()
    assert SECTION in text, f"{PAGE} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    defs = [node for code in blocks for node in ast.parse(code).body
            if isinstance(node, ast.FunctionDef) and node.name == FUNCTION]
    assert len(defs) == 1, f"{PAGE}'s {SECTION!r} must define {FUNCTION}() once in a python block"
    namespace = {"torch": torch, "relu_flydsl": relu_flydsl}
    exec(compile(ast.Module(body=defs, type_ignores=[]), PAGE, "exec"), namespace)
    return namespace[FUNCTION]


use_flydsl_relu = readme_function()
RELU_NAMES = ["model.decoder.layers.0.activation_fn", "model.decoder.layers.1.activation_fn"]


def tiny_opt(dtype):
    config = transformers.OPTConfig(activation_function="relu", vocab_size=64, hidden_size=16, ffn_dim=32,
                                    num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=32,
                                    word_embed_proj_dim=16)
    torch.manual_seed(0)
    return transformers.OPTForCausalLM(config).to(dtype).eval()


def the_ids():
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


def bits(t):
    return t.view(INT_VIEW[t.dtype])


def models(dtype):
    """(unmodified, modified): the same weights; the modified one calls relu_flydsl."""
    plain = tiny_opt(dtype)
    ours = copy.deepcopy(plain)
    assert use_flydsl_relu(ours) == RELU_NAMES
    assert all(type(m) is relu_flydsl.layers.ReLU for n, m in ours.named_modules() if n in RELU_NAMES)
    assert not any(type(m) is torch.nn.ReLU for m in ours.modules())
    assert sum(type(m) is torch.nn.ReLU for m in plain.modules()) == 2
    return plain, ours


@pytest.fixture
def registered(vgpu, monkeypatch):
    """The virtual device checks every access against registered allocations, and the
    model allocates its activations itself: each call into the dispatcher registers its
    x and out for that call (relu()'s fast path, which allocates its out itself, is
    kept out: no entry is left for it). Returns the list of (numel, dtype) each call saw."""
    import relu_flydsl._dispatch as dispatch

    real_run, calls = dispatch.run, []

    def run(x, out, rung=None, *info):  # info: the device relu() already looked up
        regions = [vgpu.register(x, name="x")] + ([vgpu.register(out, name="out")] if out is not x else [])
        calls.append((x.numel(), x.dtype))
        try:
            return real_run(x, out, rung, *info)
        finally:
            for r in regions:
                vgpu.memory.remove(r)
            dispatch.STATE.refresh()  # no compiled-entry entry: the next call comes here too

    monkeypatch.setattr(dispatch, "run", run)
    return calls


def logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_the_model_really_uses_relu():
    """The check below could not fail if OPT ran no relu: zeroing what relu keeps changes the logits."""
    plain = tiny_opt(torch.float32)
    ids = the_ids()
    before = logits(plain, ids)
    for layer in plain.model.decoder.layers:
        layer.activation_fn = torch.nn.Identity()
    assert not torch.equal(logits(plain, ids), before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_logits_bit_identical_on_cpu(dtype):
    plain, ours = models(dtype)
    ids = the_ids()
    relu_flydsl.reset_dispatch_stats()
    got = logits(ours, ids)
    assert torch.equal(bits(got), bits(logits(plain, ids)))
    stats = relu_flydsl.dispatch_stats()
    assert sum(stats.values()) == 2 and all(k.startswith("fallback/") for k in stats), stats  # CPU: torch's kernel


@pytest.mark.vgpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_logits_bit_identical_on_the_virtual_gfx950(vgpu, registered, dtype):
    plain, ours = models(dtype)
    ids = the_ids()
    expected = logits(plain, ids)
    relu_flydsl.reset_dispatch_stats()
    got = logits(ours, ids)
    assert relu_flydsl.dispatch_stats() == {f"flydsl/v5/{str(dtype)[6:]}": 2}  # both layers ran the kernel
    assert len(vgpu.launches) == 2 and registered == [(2 * 8 * 32, dtype)] * 2  # batch x tokens x ffn_dim
    assert torch.equal(bits(got), bits(expected))


@pytest.fixture(scope="module")
def compiled_plain():
    plain, ours = models(torch.float32)
    torch._dynamo.reset()
    return torch.compile(plain, fullgraph=True), ours


def test_compiled_logits_bit_identical(compiled_plain):
    """Default: layers.ReLU traces to torch's relu, so the graph is the unmodified model's."""
    plain_c, ours = compiled_plain
    ids = the_ids()
    expected = logits(plain_c, ids)
    relu_flydsl.reset_dispatch_stats()
    got = logits(torch.compile(ours, fullgraph=True), ids)
    assert relu_flydsl.dispatch_stats() == {}  # nothing eager ran: relu was compiled into the graph
    assert torch.equal(bits(got), bits(expected))


@pytest.mark.vgpu
def test_compiled_with_the_op_runs_the_kernel_on_the_virtual_gfx950(vgpu, registered, compiled_plain, monkeypatch):
    """RELU_FLYDSL_COMPILE=op keeps the FlyDSL op in the graph: on the virtual gfx950 it runs
    the kernel, and the logits still equal the compiled unmodified model's."""
    plain_c, ours = compiled_plain
    ids = the_ids()
    expected = logits(plain_c, ids)
    monkeypatch.setenv("RELU_FLYDSL_COMPILE", "op")
    torch._dynamo.reset()  # the switch is read when a graph is traced: trace anew
    relu_flydsl.reset_dispatch_stats()
    try:
        got = logits(torch.compile(copy.deepcopy(ours), fullgraph=True), ids)
    finally:
        torch._dynamo.reset()  # later tests must not reuse a graph traced with the op
    assert relu_flydsl.dispatch_stats() == {"flydsl/v5/float32": 2} and len(registered) == 2
    assert torch.equal(bits(got), bits(expected))
