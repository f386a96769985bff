"""The Hub card (CARD.md.j2, rendered into relu-build/README.md) against the code: each claim it
makes is checked here by running or reading what it describes. Its figures are checked against
docs/benchmarks.md by test_figures.py."""

import hashlib
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def card(variant_build):
    return (variant_build / "README.md").read_text()


@pytest.fixture(scope="module")
def variant(variant_build):
    import build_variant

    return variant_build / "build" / build_variant.VARIANT


def section(card, title):
    m = re.search(rf"^##+ {re.escape(title)}\n(.*?)(?=^## |\Z)", card, flags=re.M | re.S)
    assert m, f"the card has no section {title!r}"
    return m.group(1)


def table(text, header):
    """The rows (lists of stripped cells) of the markdown table whose header row starts with `header`."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {header} |")), None)
    assert start is not None, f"no table headed {header!r}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


# ---- the layouts the kernel serves, run on the virtual gfx950 --------------------------------
def _cl(shape=(2, 8, 4, 4)):
    return torch.randn(*shape).to(torch.bfloat16).to(memory_format=torch.channels_last)


# A card row's label (a keyword of its first cell; the first that appears, in this order) -> calls
# (x, out: a tensor, "empty_like", or None for relu(x)) of that layout.
LAYOUTS = {
    "offset": lambda: [(torch.randn(4097).to(torch.bfloat16)[1:], "empty_like")],
    "other strides": lambda: [(torch.randn(2, 8, 4, 4).to(torch.bfloat16),
                               torch.empty(2, 8, 4, 4, dtype=torch.bfloat16).to(memory_format=torch.channels_last))],
    "not dense": lambda: [(torch.randn(64, 96).to(torch.bfloat16)[:, ::2], "empty_like"),
                          (torch.randn(64, 96).to(torch.bfloat16)[:, ::2], None)],
    "empty": lambda: [(torch.empty(0, dtype=torch.bfloat16), "empty_like")],
    "transposed": lambda: [(torch.randn(48, 64).to(torch.bfloat16).t(), "empty_like"),
                           (torch.randn(48, 64).to(torch.bfloat16).t(), None)],
    "channels_last": lambda: [(_cl(), "empty_like"), (_cl(), None)],
    "contiguous": lambda: [(torch.randn(64, 48).to(torch.bfloat16), "empty_like")],
}
SAYS = {"kernel": True, "torch's kernel": False}


def _label(cell):
    hits = [k for k in LAYOUTS if k in cell.replace("`", "")]
    assert hits, f"card layout row {cell!r}: no case in LAYOUTS; add one that runs it"
    return hits[0]


def test_the_layouts_the_card_names_are_the_layouts_the_kernel_serves(card, vgpu):
    import relu_flydsl

    rows = table(section(card, "What it computes"), "layout")
    labels = {_label(row[0]): row[1] for row in rows}
    assert len(labels) == len(rows), f"two card rows map to one case: {[r[0] for r in rows]}"
    assert set(labels) == set(LAYOUTS), f"the card's layout table misses {sorted(set(LAYOUTS) - set(labels))}"
    wrong = []
    for label, says in labels.items():
        assert says in SAYS, f"layout {label}: path {says!r} is neither 'kernel' nor \"torch's kernel\""
        for x, out in LAYOUTS[label]():
            if isinstance(out, str):
                out = torch.empty_like(x)
            relu_flydsl.reset_dispatch_stats()
            for t in {t.untyped_storage().data_ptr(): t for t in (x, out) if t is not None}.values():
                vgpu.register(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), name="tensor")
            if out is None:
                vgpu.fresh_output(x.numel() * x.element_size(), name="relu(x) output")
            try:
                y = relu_flydsl.relu(x, out=out)
                vgpu.check()
            finally:
                vgpu.reset()  # forgets this call's regions
            paths = [p for p, n in relu_flydsl.dispatch_stats().items() if n]
            kernel = paths == ["flydsl/v5/bfloat16"]
            if kernel != SAYS[says]:
                wrong.append(f"{label} (out={'x-shaped' if out is not None else 'None'}): card says {says}, "
                             f"ran {paths}")
            assert torch.equal(y.float(), torch.where(x.float() < 0, 0.0, x.float())) or not x.numel()
    assert not wrong, wrong


def test_the_card_names_no_contiguity_rule(card):
    assert "not contiguous" not in card, "the kernel serves dense strided tensors: say which layouts (the table)"


# ---- torch.compile ---------------------------------------------------------------------------
def _compiled_graph(relu):
    import torch._dynamo

    graphs = []

    def backend(gm, inputs):
        graphs.append(str(gm.graph))
        return gm.forward

    torch._dynamo.reset()
    f = torch.compile(lambda x: relu(x) * 2, backend=backend, fullgraph=True)
    f(torch.randn(8))
    torch._dynamo.reset()
    assert len(graphs) == 1
    return graphs[0]


def test_what_a_compiled_graph_runs_by_default_and_with_the_op_setting(card, monkeypatch):
    import relu_flydsl
    from relu_flydsl._ops import add_op_namespace_prefix

    namespace = add_op_namespace_prefix("relu").split("::")[0]
    text = " ".join(section(card, "What it computes").split())
    assert "a compiled graph runs torch's relu, which Inductor fuses" in text
    assert "the FlyDSL kernels do not run there" in text
    assert "With `RELU_FLYDSL_COMPILE=op` (read when a graph is traced) the graph keeps the kernel op" in text
    assert "torch.library` ops" not in card.replace("\n", " ")  # compile does not go through the op by default

    monkeypatch.delenv("RELU_FLYDSL_COMPILE", raising=False)
    default = _compiled_graph(relu_flydsl.relu)
    assert "torch.relu" in default and namespace not in default, default
    monkeypatch.setenv("RELU_FLYDSL_COMPILE", "op")
    op = _compiled_graph(relu_flydsl.relu)
    assert namespace in op, op


def test_gradients_go_through_the_registered_op(card):
    import relu_flydsl
    from relu_flydsl._ops import add_op_namespace_prefix

    text = " ".join(section(card, "What it computes").split())
    assert "`relu(x)` on a tensor that requires grad runs through a registered `torch.library` op" in text
    x = torch.randn(6, requires_grad=True)
    y = relu_flydsl.relu(x)
    assert add_op_namespace_prefix("relu").split("::")[0] in type(y.grad_fn).__name__
    y.sum().backward()
    assert torch.equal(x.grad, (x > 0).float())
    with pytest.raises(RuntimeError, match="out= does not support automatic differentiation"):
        relu_flydsl.relu(x, out=torch.empty(6))


# ---- what ships --------------------------------------------------------------------------------
def _elf_machine(path):
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path.name} is not an ELF file"
    return head[4], int.from_bytes(head[18:20], "little")  # (class: 2 = 64-bit, e_machine)


def test_what_ships_and_the_toolchain_that_built_it(card, variant):
    manifest = json.loads((variant / "code_objects" / "manifest.json").read_text())
    ships = " ".join(section(card, "What ships").split())
    objects = sorted((variant / "code_objects").glob("*.co"))
    assert len(objects) == len(manifest["kernels"]) > 0
    assert f"{len(objects)} gfx950 code objects" in ships
    assert all(_elf_machine(p) == (2, 224) for p in objects), "a .co is not a 64-bit AMDGPU ELF"  # EM_AMDGPU
    tools = manifest["toolchain"]
    assert f"FlyDSL {tools['flydsl']}, {tools['llvm']}" in ships

    entry = manifest["entry"]
    binary = variant / "code_objects" / entry["file"]
    assert f"`code_objects/{entry['file']}`" in ships
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == entry["sha256"]
    assert _elf_machine(binary) == (2, 62), "the entry is not an x86-64 ELF"  # EM_X86_64
    assert "a native x86-64 Linux binary" in ships and f"`{entry['abi']}`" in ships
    assert f"{entry['toolchain']['cc']}, CPython {entry['toolchain']['python_headers']} headers" in ships
    assert "Python plus prebuilt" not in card  # the variant is not Python and code objects alone


# ---- where the low-host-time path loads, and what a call costs elsewhere ------------------------
def _requirements(card):
    return " ".join(section(card, "Requirements").split())


def test_where_the_compiled_entry_loads(card, monkeypatch):
    from relu_flydsl import _compiled_entry as E

    text = _requirements(card)
    m = re.search(r"loads on CPython (\d+)\.(\d+)-(\d+)\.(\d+) on (x86-64 Linux) with torch (\d+)\.(\d+) or newer", text)
    assert m, text
    lo, hi = (int(m[1]), int(m[2])), (int(m[3]), int(m[4]))
    assert (lo, hi) == E.PYTHONS, f"the card says CPython {lo}-{hi}; _compiled_entry.PYTHONS is {E.PYTHONS}"

    monkeypatch.delenv(E.ENV_ENTRY, raising=False)
    real_sys = sys

    def fake_sys(version):
        return SimpleNamespace(platform=real_sys.platform, version_info=version, implementation=real_sys.implementation,
                               _is_gil_enabled=lambda: True)

    assert E._why_not_here() is None, "this machine should load the entry (the checks below compare with it)"
    # each end of the Python range loads; one past either end does not
    for version, loads in ((lo + (0,), True), (hi + (0,), True), ((lo[0], lo[1] - 1, 0), False),
                           ((hi[0], hi[1] + 1, 0), False)):
        monkeypatch.setattr(E, "sys", fake_sys(version))
        why = E._why_not_here()
        assert (why is None) == loads, (version, why)
    monkeypatch.setattr(E, "sys", real_sys)
    monkeypatch.setattr(E, "platform", SimpleNamespace(machine=lambda: "aarch64"))
    assert m[5] in E._why_not_here()
    monkeypatch.setattr(E, "platform", SimpleNamespace(machine=lambda: "x86_64"))
    # torch: what it needs is the DLPack C exchange API, which torch 2.9.1 lacks
    assert "does not load on torch 2.9.1 (no DLPack C exchange API)" in text
    monkeypatch.setattr(E, "torch", SimpleNamespace(Tensor=type("Tensor", (), {}), __version__="2.9.1"))
    assert "no DLPack C exchange API" in E._why_not_here()
    monkeypatch.setattr(E, "torch", torch)
    installed = tuple(int(v) for v in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    assert installed >= (int(m[6]), int(m[7])) and hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    assert "free-threaded" in text
    monkeypatch.setattr(E, "sys", SimpleNamespace(**dict(vars(fake_sys(lo + (0,))), _is_gil_enabled=lambda: False)))
    assert "free-threaded" in E._why_not_here()
    monkeypatch.setattr(E, "sys", real_sys)
    assert f"`{E.ENV_ENTRY}=0` switches the entry off" in text


def test_the_card_says_what_a_call_costs_where_the_entry_does_not_load(card):
    import test_figures

    text = _requirements(card)
    found = test_figures.ratios(text)
    assert [f.setting for f in found if f.call == "relu(x, out=y)"] == ["without the entry"], found
    fallback = " ".join(section(card, "Fallback behaviour").split())
    assert {(f.setting, f.call) for f in test_figures.ratios(fallback)} == {("H200", "relu(x, out=y)"),
                                                                           ("H200", "relu(x)")}
    assert "H200, not gfx950" in fallback


# ---- commands, functions, status ----------------------------------------------------------------
COMMAND = re.compile(r"(?:^|[\s`(])((?:bash|sh) (\S+)|python3? -m ([\w.]+)|python3? (\S+\.py)|\.venv/bin/\S+)")


def unreachable_commands(card_text, download: Path):
    """Commands in the card that run a file or module the download lacks, in a paragraph (or the
    paragraph before a code block) that does not say they live in the source repository."""
    problems = []
    blocks = re.split(r"\n\s*\n", card_text)
    for i, block in enumerate(blocks):
        context = block + ("\n" + blocks[i - 1] if block.lstrip().startswith("```") and i else "")
        for m in COMMAND.finditer(block):
            target = (m[2] or m[4] or (m[3] and m[3].replace(".", "/") + ".py") or m[1]).strip("`),.")
            if target.startswith(".venv/") or not (download / target).exists():
                if "source repository" not in context:
                    problems.append(m[1].strip("`"))
    return problems


def test_no_command_the_download_cannot_run_without_where_it_lives(card, variant_build):
    assert unreachable_commands(card, variant_build) == []
    assert "bash main.sh" in card and "bash tests/hardware/run.sh --variant" in card  # the checker saw them
    # the checker can fail: the old card's sentence
    assert unreachable_commands("**No hardware numbers yet; run `bash main.sh` on an MI350X.**", variant_build) == \
        ["bash main.sh"]
    assert unreachable_commands("Run `python -m benchmarks.ladder` here.", variant_build) == \
        ["python -m benchmarks.ladder"]


def test_the_functions_the_card_lists_are_the_public_api(card, variant):
    import build_variant

    api = build_variant.public_api(variant)
    listed = re.findall(r"^- `(\w+)`$", section(card, "Available functions"), flags=re.M)
    assert listed == api
    described = {re.match(r"`(\w+)", row[0])[1] for row in table(section(card, "Available functions"), "function")}
    for cell in table(section(card, "Available functions"), "function"):
        described |= set(re.findall(r"`(\w+)\(", cell[0]))
    assert described - {"layers"} <= set(api), f"the card describes {sorted(described - set(api))}, not public"
    assert set(api) - {"__version__", "layers"} <= described, f"undescribed: {sorted(set(api) - described)}"
    import inspect

    import relu_flydsl

    for row in table(section(card, "Available functions"), "function"):
        for name, params in re.findall(r"`(\w+)\(([^`]*)\)`", row[0]):
            written = [p.split("=")[0].strip() for p in params.split(",") if p.strip() not in ("", "*")]
            actual = list(inspect.signature(getattr(relu_flydsl, name)).parameters)
            assert written == actual, f"the card writes {name}({params}); the code has {actual}"
    layers = section(card, "Available layers")
    from relu_flydsl import layers as L

    named = re.findall(r"`layers\.(\w+)`", layers)
    assert named and all(isinstance(getattr(L, n), type) and issubclass(getattr(L, n), torch.nn.Module) for n in named)


def test_version_4_names_are_described_once_public(card, variant, tmp_path):
    """The card's status()/explain()/VariantVerificationError rows follow __all__: rendered with
    them public, it describes them; without, it does not."""
    import build_variant

    config = build_variant.read_build_toml()
    names = ("status", "explain", "VariantVerificationError")
    plain = build_variant.card_variables(config, variant)
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string((ROOT / "CARD.md.j2").read_text())
    with_v4 = template.render(**dict(plain, public_api=sorted(set(plain["public_api"]) | set(names))))
    without = template.render(**dict(plain, public_api=[n for n in plain["public_api"] if n not in names]))
    for name in names:
        assert f"| `{name}" in with_v4 and f"| `{name}" not in without
    assert "`relu_flydsl.status()`" in with_v4 and "`relu_flydsl.status()`" not in without


def test_the_status_matches_docs_benchmarks(card):
    """The card says no hardware number exists exactly while docs/benchmarks.md's status says so."""
    status = (ROOT / "docs" / "benchmarks.md").read_text().split("\n## ", 2)[0]
    none = "no gfx950 number exists" in status.lower()
    assert none == ("No hardware numbers yet" in card) == ("No gfx950 number exists yet" in card)
