"""A functional emulator of the gfx950 (CDNA4) instruction subset the ladder
kernels compile to. Wave64, numpy-vectorized over the 64 lanes and over every
wave of a launch batch (kernels without LDS or barriers have no cross-wave
interaction).

    decode.py      disassembly -> Program: instructions, each handler looked up
                   once in HANDLERS (mnemonic -> handler), static checks
    wave.py        registers of a batch of waves; operand reads and writes (Ctx)
    scalar.py      program control and SALU
    vector.py      VALU: integer/bit ops, compares, v_cndmask, v_perm, SDWA
    memory_ops.py  SMEM, global and raw-buffer accesses, buffer-resource checks
    launch.py      Emulator: entry state and the step loop; KERNELS record
    errors.py      LaunchError, DescriptorError (Unsupported: ../disasm.py)

The static checks (s_nop hazards, s_waitcnt) live beside it in ../hazards.py
and ../waitcnt.py. An instruction, operand form or modifier that is not
implemented raises `Unsupported` naming it: nothing is skipped silently.
"""

from ..disasm import Unsupported
from .decode import HANDLERS, Program
from .errors import DescriptorError, LaunchError
from .launch import KERNELS, STRADDLE_MODELS, Emulator, KernelRecord
from .wave import LANES, POISON

__all__ = ["DescriptorError", "Emulator", "HANDLERS", "KERNELS", "KernelRecord", "LANES", "LaunchError", "POISON",
           "Program", "STRADDLE_MODELS", "Unsupported"]
