import torch

from ._relu import relu


class ReLU(torch.nn.Module):
    """Drop-in for torch.nn.ReLU's forward (kernels' layer protocol: no __init__)."""

    has_backward = True        # gradients match torch.relu's bit for bit
    # Compiled, relu traces to torch's relu and Inductor fuses it (no graph
    # break, no extra pass); RELU_FLYDSL_COMPILE=op keeps the FlyDSL op.
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu(x)
