"""Why a launch stops."""

from ..disasm import Unsupported  # noqa: F401  (an instruction, operand or modifier not implemented)


class LaunchError(Exception):
    """The launch cannot run as given (bad code, bad launch shape, a failed static check)."""


class DescriptorError(LaunchError):
    """A buffer resource the emulator does not accept (the message names the field)."""
