"""Where models run: ``common.device`` read once, checked at once.

Every stage that loads or trains a model calls :func:`resolve_device` before it reads anything
heavy, so a profile that asks for ``cuda`` on a machine without one stops at its first line
with an error that says so. Nothing falls back to the CPU in silence: a paper-scale run that
quietly trained on the CPU would take weeks and look like a hang.
"""

from __future__ import annotations

import re

import torch


class DeviceUnavailableError(RuntimeError):
    """The requested device does not exist on this machine."""


def resolve_device(name: str | torch.device, what: str = "common.device") -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"`` → a :class:`torch.device` that exists here.

    Raises ``ValueError`` for another name and :class:`DeviceUnavailableError` for a CUDA
    device this machine lacks (no GPU, or fewer than N + 1). ``what`` names the setting in
    the message.
    """
    text = str(name)
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N' ({what}), got {text!r}")
    device = torch.device(text)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device {text!r} asked for ({what}), but this machine has no CUDA GPU "
                f"(torch {torch.__version__} sees none): run on a GPU machine, or set "
                f"{what}: cpu"
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise DeviceUnavailableError(
                f"device {text!r} asked for ({what}), but this machine has {count} "
                f"CUDA device(s): cuda:0 … cuda:{count - 1}"
            )
    return device
