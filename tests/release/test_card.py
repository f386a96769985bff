"""The Hub card (CARD.md.j2, rendered into relu-build/README.md) against the code: each claim it
makes is checked here by running or reading what it describes. Its figures and the claims it
shares with the README and docs are checked by test_figures.py, its links against what the
release uploads by test_release_tool.py."""

import hashlib
import inspect
import json
import os
import re
import subprocess
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


# kernel-builder's card order (use, functions, layers, backends, what is checked, benchmarks,
# pinning, source), and the card's size: a page read on the Hub, detail in the source tree's docs.
ORDER = ["How to use", "Available functions", "Available layers", "Supported backends", "What is checked",
         "Benchmarks", "Load it pinned", "Source code"]
CARD_MAX_LINES = 96


def _with_every_name(variant):
    """The card rendered as if every name a release may add (check) were public: the longest card."""
    import build_variant
    import jinja2

    variables = build_variant.card_variables(build_variant.read_build_toml(), variant)
    variables["public_api"] = sorted(set(variables["public_api"]) | {"check"})
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    return env.from_string((ROOT / "CARD.md.j2").read_text()).render(**variables)


def test_the_card_is_short_and_in_kernel_builders_order(card, variant):
    assert re.findall(r"^## (.+)$", card, flags=re.M) == ORDER
    for text in (card, _with_every_name(variant)):
        n = len(text.splitlines())
        assert n <= CARD_MAX_LINES, f"the card has {n} lines (at most {CARD_MAX_LINES}): move detail to the docs"


def section(card, title):
    m = re.search(rf"^##+ {re.escape(title)}\n(.*?)(?=^## |\Z)", card, flags=re.M | re.S)
    assert m, f"the card has no section {title!r}"
    return m.group(1)


# ---- the layouts the kernel serves, run on the virtual gfx950 --------------------------------
def _cl(shape=(2, 8, 4, 4)):
    return torch.randn(*shape).to(torch.bfloat16).to(memory_format=torch.channels_last)


# A layout the card names (a keyword of the item) -> calls (x, out: a tensor, "empty_like", or None
# for relu(x)) of that layout; "kill switch" runs with RELU_FLYDSL_DISABLE=1 set.
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
    "RELU_FLYDSL_DISABLE=1": lambda: [(torch.randn(64, 48).to(torch.bfloat16), "empty_like")],
}


def card_layouts(card):
    """{layout keyword: True (the kernel) / False (torch's kernel)} from the card's two sentences
    "The kernel: A; B; C." and "Torch's kernel: D; E." of "Supported backends"."""
    text = " ".join(section(card, "Supported backends").split()).replace("`", "")
    said = {}
    for label, kernel in (("The kernel:", True), ("Torch's kernel:", False)):
        m = re.search(rf"{re.escape(label)} (.*?)\.(?: |$)", text)
        assert m, f"the card has no sentence {label!r}"
        for item in m[1].split(";"):
            hits = [k for k in LAYOUTS if k.lower() in item.lower()]
            assert hits, f"card layout {item.strip()!r}: no case in LAYOUTS; add one that runs it"
            for k in hits:
                assert k not in said, f"layout {k} named twice"
                said[k] = kernel
    return said


def test_the_layouts_the_card_names_are_the_layouts_the_kernel_serves(card, vgpu, monkeypatch):
    import relu_flydsl

    said = card_layouts(card)
    assert set(said) == set(LAYOUTS), f"the card does not say {sorted(set(LAYOUTS) - set(said))}"
    wrong = []
    for label, kernel_said in said.items():
        if label == "RELU_FLYDSL_DISABLE=1":
            monkeypatch.setenv("RELU_FLYDSL_DISABLE", "1")
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
            if kernel != kernel_said:
                wrong.append(f"{label} (out={'x-shaped' if out is not None else 'None'}): the card says "
                             f"{'the kernel' if kernel_said else 'torch'}, ran {paths}")
            assert torch.equal(y.float(), torch.where(x.float() < 0, 0.0, x.float())) or not x.numel()
        monkeypatch.delenv("RELU_FLYDSL_DISABLE", raising=False)
    assert not wrong, wrong


def test_the_layout_reader_can_fail():
    card = "## Supported backends\n\nThe kernel: contiguous; a view at an offset.\nTorch's kernel: an empty tensor.\n"
    assert card_layouts(card) == {"contiguous": True, "offset": True, "empty": False}
    with pytest.raises(AssertionError, match="no case"):
        card_layouts(card.replace("an empty tensor", "a sparse tensor"))


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
    text = " ".join(section(card, "Supported backends").split())
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

    text = " ".join(section(card, "Supported backends").split())
    assert "Gradients: torch.relu's backward, through a registered `torch.library` op." in text
    x = torch.randn(6, requires_grad=True)
    y = relu_flydsl.relu(x)
    assert add_op_namespace_prefix("relu").split("::")[0] in type(y.grad_fn).__name__
    y.sum().backward()
    assert torch.equal(x.grad, (x > 0).float())


# ---- what ships --------------------------------------------------------------------------------
def _elf_machine(path):
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path.name} is not an ELF file"
    return head[4], int.from_bytes(head[18:20], "little")  # (class: 2 = 64-bit, e_machine)


def _ships(card):
    m = re.search(r"\*\*What ships:\*\*(.*?)(?:\n\n|\Z)", section(card, "Supported backends"), flags=re.S)
    assert m, "the card has no **What ships:** paragraph"
    return " ".join(m[1].split())


def test_what_ships_and_where_its_toolchain_is_recorded(card, variant):
    manifest = json.loads((variant / "code_objects" / "manifest.json").read_text())
    ships = _ships(card)
    objects = sorted((variant / "code_objects").glob("*.co"))
    assert len(objects) == len(manifest["kernels"]) > 0
    assert f"{len(objects)} gfx950 code objects" in ships
    assert all(_elf_machine(p) == (2, 224) for p in objects), "a .co is not a 64-bit AMDGPU ELF"  # EM_AMDGPU
    # "each sha256 (and the toolchain that built it) in code_objects/manifest.json"
    assert "each sha256 (and the toolchain that built it) in `code_objects/manifest.json`" in ships
    for key, kernel in manifest["kernels"].items():
        assert hashlib.sha256((variant / "code_objects" / kernel["file"]).read_bytes()).hexdigest() == kernel["sha256"], key
    assert manifest["toolchain"]["flydsl"] and manifest["toolchain"]["llvm"]

    entry = manifest["entry"]
    binary = variant / "code_objects" / entry["file"]
    assert f"`code_objects/{entry['file']}`" in ships
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == entry["sha256"]
    assert entry["toolchain"]["cc"] and entry["toolchain"]["python_headers"]
    assert _elf_machine(binary) == (2, 62), "the entry is not an x86-64 ELF"  # EM_X86_64
    assert "a native x86-64 Linux binary" in ships and f"`{entry['abi']}`" in ships
    assert "Python plus prebuilt" not in card  # the variant is not Python and code objects alone


# ---- where the low-host-time path loads, and what a call costs elsewhere ------------------------
def _requirements(card):
    return _ships(card)


def test_where_the_compiled_entry_loads(card, monkeypatch):
    from relu_flydsl import _compiled_entry as E

    text = _requirements(card)
    m = re.search(r"where it loads: CPython (\d+)\.(\d+)-(\d+)\.(\d+) on (x86-64 Linux) with torch (\d+)\.(\d+) or newer", text)
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
    # the free-threaded build is told by how it was built (Py_GIL_DISABLED), whatever the GIL's state now
    real_var = E.sysconfig.get_config_var
    monkeypatch.setattr(E.sysconfig, "get_config_var", lambda n: 1 if n == "Py_GIL_DISABLED" else real_var(n))
    assert "free-threaded" in E._why_not_here()
    monkeypatch.setattr(E.sysconfig, "get_config_var", real_var)
    assert f"`{E.ENV_ENTRY}=0` switches the entry off" in text


def test_the_card_says_what_a_call_costs_where_the_entry_does_not_load(card):
    import test_figures

    found = test_figures.ratios(_requirements(card))
    assert sorted((f.setting, f.call) for f in found) == [("without the entry", "relu(x)"),
                                                         ("without the entry", "relu(x, out=y)")], found
    everywhere = {(f.setting, f.call) for f in test_figures.ratios(card)}
    assert everywhere == {(f.setting, f.call) for f in found}, "host-time figures outside the entry's paragraph"


# ---- commands, functions, status ----------------------------------------------------------------
COMMAND = re.compile(r"(?:^|[\s`(])((?:bash|sh) (\S+)|python3? -m ([\w.]+)|python3? (\S+\.py)|python3? ([\w./-]+) check\b|"
                     r"\.venv/bin/\S+)")
# The local folder the card's `hf download ... --local-dir` writes: its paths are the download's.
LOCAL_DIR = re.compile(r"^relu-flydsl-v\d+/")


def unreachable_commands(card_text, download: Path):
    """Commands in the card that run a file, module or folder the download lacks, in a paragraph
    (or the paragraph before a code block) that does not say they live in the source tree.
    `python -m relu_flydsl` runs the variant (its __main__.py); `python FOLDER check` a folder's."""
    problems = []
    blocks = re.split(r"\n\s*\n", card_text)
    for i, block in enumerate(blocks):
        context = block + ("\n" + blocks[i - 1] if block.lstrip().startswith("```") and i else "")
        for m in COMMAND.finditer(block):
            if m[3] == "relu_flydsl":
                target = "build/torch-rocm/__main__.py"
            elif m[5]:
                target = LOCAL_DIR.sub("", m[5].strip("`),.")) + "/__main__.py"
            else:
                target = (m[2] or m[4] or (m[3] and m[3].replace(".", "/") + ".py") or m[1]).strip("`),.")
            if target.startswith(".venv/") or not (download / target).exists():
                if "source tree" not in context:
                    problems.append(m[1].strip("`"))
    return problems


def test_no_command_the_download_cannot_run_without_where_it_lives(card, variant_build, variant):
    assert unreachable_commands(card, variant_build) == []
    assert "bash main.sh" in card  # the checker saw it
    assert unreachable_commands(_with_every_name(variant), variant_build) == []
    # the checker can fail: the old card's sentences, and a check run on a folder the download lacks
    assert unreachable_commands("**No hardware numbers yet; run `bash main.sh` on an MI350X.**", variant_build) == \
        ["bash main.sh"]
    assert unreachable_commands("Run `python -m benchmarks.ladder` here.", variant_build) == \
        ["python -m benchmarks.ladder"]
    assert unreachable_commands("Run `python relu-flydsl-v9/build/torch-cuda check`.", variant_build) == \
        ["python relu-flydsl-v9/build/torch-cuda check"]
    assert unreachable_commands("Run `bash tests/hardware/run.sh --variant X`.", variant_build) == \
        ["bash tests/hardware/run.sh"]


def _described(card):
    """Every public name the card's function list describes: the code spans of its items."""
    return set(re.findall(r"`(\w+)(?:\([^`]*\))?`", section(card, "Available functions")))


def test_the_functions_the_card_lists_are_the_public_api(card, variant):
    import build_variant
    import relu_flydsl

    api = build_variant.public_api(variant)
    for text in (card, _with_every_name(variant)):
        described = _described(text) & (set(api) | {"check"})
        if "check" not in api:
            described.discard("check")
        assert described == set(api), f"the card describes {sorted(described)}, __all__ is {api}"
    firsts = re.findall(r"^- `(\w+)", section(card, "Available functions"), flags=re.M)
    assert firsts and set(firsts) <= set(api), f"a list item starts with a name that is not public: {firsts}"
    # Each written signature names parameters the code has, in its order.
    for name, params in re.findall(r"`(\w+)\(([^`]*)\)`", section(_with_every_name(variant), "Available functions")):
        if not hasattr(relu_flydsl, name):
            assert name == "check" and "check" not in api, name
            continue
        written = [p.split("=")[0].strip() for p in params.split(",") if p.strip() not in ("", "*")]
        actual = list(inspect.signature(getattr(relu_flydsl, name)).parameters)
        assert [p for p in actual if p in written] == written, f"the card writes {name}({params}); the code has {actual}"
    layers = section(card, "Available layers")
    from relu_flydsl import layers as L

    named = re.findall(r"`layers\.(\w+)`", layers)
    assert named and all(isinstance(getattr(L, n), type) and issubclass(getattr(L, n), torch.nn.Module) for n in named)


def test_version_5_names_are_described_once_public(card, variant):
    """The card's check() and explain(arch=) follow __all__: rendered with `check` public it
    describes both and the post-upgrade check; without, neither (they ship together)."""
    import build_variant
    import jinja2

    plain = build_variant.card_variables(build_variant.read_build_toml(), variant)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string((ROOT / "CARD.md.j2").read_text())
    with_check = template.render(**dict(plain, public_api=sorted(set(plain["public_api"]) | {"check"})))
    without = template.render(**dict(plain, public_api=[n for n in plain["public_api"] if n != "check"]))
    for marker in ("- `check`: `check(", 'arch="gfx950"', "After every upgrade, on the MI350X", "nothing was tested"):
        assert marker in with_check and marker not in without, marker


def test_what_the_card_says_check_and_explain_take_they_take(card):
    import relu_flydsl

    if 'arch="gfx950"' in card:
        assert "arch" in inspect.signature(relu_flydsl.explain).parameters
    if "`check(" in card:
        assert "check" in relu_flydsl.__all__
        assert "bandwidth" in inspect.signature(relu_flydsl.check).parameters


def test_the_card_prints_the_release_fingerprint(card, variant, variant_build):
    """The fingerprint on the card is the one verify_digest() returns for these files and takes as
    expected=, and the release records: rendered from the build, never written by hand."""
    import release
    import relu_flydsl

    printed = set(re.findall(r"sha256:[0-9a-f]{64}", card))
    assert len(printed) == 1, printed
    (fingerprint,) = printed
    assert f'verify_digest(expected="{fingerprint}")' in card
    assert relu_flydsl.verify_digest(str(variant), expected=fingerprint) == fingerprint
    assert release.manifest_for(variant_build)["digest_fingerprint"] == fingerprint
    assert "{{ fingerprint }}" in (ROOT / "CARD.md.j2").read_text() and "sha256:" not in (ROOT / "CARD.md.j2").read_text()


def test_the_cards_check_command_says_nothing_was_tested_here(card, variant, tmp_path):
    """The card's post-upgrade command, run as printed on this machine (CPU torch, no gfx950) from
    a folder laid out as `hf download` lays it: exit 5 (nothing was tested) and the reason, never a
    pass, nor a usage error's 4."""
    import relu_flydsl

    if "check" not in relu_flydsl.__all__:
        import release

        version = int(release.build_variant.read_build_toml()["general"]["version"])
        assert "check" not in release.PROMISED_ADDITIONS.get(version, ()), "check is promised for this version"
        pytest.skip(f"this tree has no check() yet (promised for v{min(v for v, s in release.PROMISED_ADDITIONS.items() if 'check' in s)})")
    (command,) = {m.group(0) for m in re.finditer(r"python (relu-flydsl-v\d+/build/torch-rocm) check", card)}
    folder = tmp_path / command.split()[1]
    import shutil

    shutil.copytree(variant, folder)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    r = subprocess.run([sys.executable, *command.split()[1:]], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 5, f"`{command}` exited {r.returncode} on a CPU machine:\n{out[-3000:]}"
    assert "usage:" not in out, out[-2000:]  # the check's verdict, not its argument parser's
    assert re.search(r"CPU", out), f"the verdict does not name the reason (a CPU build of torch):\n{out[-2000:]}"


def test_the_cards_health_check_fails_where_no_gfx950_is_served_only_with_the_flag_it_names(card, variant, tmp_path):
    """The card tells a start-up script which flag makes "no gfx950 served" fail, and the folder does
    as the card says on this machine (CPU torch): without the flag NO GFX950 SERVED and exit 0, with
    it exit 5, the card's "nothing was tested"."""
    assert "`--require-gfx950`" in card and "`NO GFX950 SERVED`" in card and "5: nothing was tested" in card
    (command,) = {m.group(1) for m in re.finditer(r"`python (relu-flydsl-v\d+/build/torch-rocm)`", card)}
    import shutil

    shutil.copytree(variant, tmp_path / command)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELU_FLYDSL_")}
    for flags, code in (((), 0), (("--require-gfx950",), 5)):
        r = subprocess.run([sys.executable, command, *flags], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
        assert (r.returncode, "NO GFX950 SERVED" in r.stdout + r.stderr) == (code, True), (flags, r.stdout[-2000:],
                                                                                           r.stderr[-2000:])


def test_the_status_matches_docs_benchmarks(card):
    """The card says no hardware number exists exactly while docs/benchmarks.md's status says so."""
    status = (ROOT / "docs" / "benchmarks.md").read_text().split("\n## ", 2)[0]
    none = "no gfx950 number exists" in status.lower()
    assert none == ("No hardware numbers yet" in card) == ("No gfx950 number exists yet" in card)
