# The shape kernel-builder generates for noarch kernels. tools/build_variant.py
# rewrites _UNIQUE_ID in the built variant, so two releases loaded into one
# process register their ops under different namespaces.
import torch

_KERNEL_NAME = "relu_flydsl"
_UNIQUE_ID = "dev"


def get_backend() -> str:
    if torch.version.cuda is not None:
        return "cuda"
    if torch.version.hip is not None:
        return "rocm"
    return "cpu"


_OPS_NAME = f"_{_KERNEL_NAME}_{get_backend()}_{_UNIQUE_ID}"

ops = getattr(torch.ops, _OPS_NAME)


def add_op_namespace_prefix(op_name: str) -> str:
    """Prefix op by namespace."""
    return f"{_OPS_NAME}::{op_name}"
