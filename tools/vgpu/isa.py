"""Former name of disasm.py: only vgpu/__init__.py still imports it (its owner
changes that line to `from .disasm import Unsupported`; then this file goes)."""

from .disasm import Unsupported  # noqa: F401
