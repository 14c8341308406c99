"""ChannelShuffle: interleave the channels of groups (mirrors ``torch.nn.modules.channelshuffle``).

``(N, C, *)`` viewed as ``(N, g, C / g, *)`` and read as ``(N, C / g, g, *)``:
ShuffleNet's step that lets grouped convolutions see each other's channels.

    >>> agrad.nn.ChannelShuffle(2)(agrad.arange(4.0).reshape(1, 4, 1, 1)).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
"""

from __future__ import annotations

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Divide the channels of ``(N, C, *)`` into ``groups`` and interleave them.

        >>> agrad.nn.ChannelShuffle(3)
        ChannelShuffle(groups=3)
    """

    __constants__ = ["groups"]
    groups: int

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
