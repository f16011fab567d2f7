"""The loss modules of ``tensord.nn``: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss,
BCELoss, BCEWithLogitsLoss, SmoothL1Loss, HuberLoss.

Each takes its PyTorch namesake's constructor arguments in the same order
(the deprecated ``size_average`` and ``reduce`` included: given, they set
``reduction`` as in PyTorch, with its warning) and calls the function of the
same name in ``tensord.nn.functional`` on ``forward(input, target)``, so
shapes, dtypes, reductions and errors are those functions' (a bad
``reduction`` is a ValueError at forward). A class weight is a buffer named
``weight`` (and BCEWithLogitsLoss's ``pos_weight`` one named ``pos_weight``),
as in PyTorch; ``repr`` is PyTorch's.
"""
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss",
           "HuberLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = F._legacy_reduction(size_average, reduce, stacklevel=2)
        self.reduction = reduction  # checked by the function at forward, as in PyTorch


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of unnormalised scores against class indices (int64) or
    class probabilities: ``F.cross_entropy(input, target, weight, ignore_index,
    reduction, label_smoothing)``. ``input`` [N, C] (or [C], or [N, C, d1, ...]);
    the result is a 0-dim tensor unless ``reduction='none'``."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                 label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities against int64 class
    indices: ``F.nll_loss(input, target, weight, ignore_index, reduction)``."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error ``(input - target)**2`` (broadcast, with PyTorch's
    warning when the shapes differ), reduced by ``reduction``:
    ``F.mse_loss``."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error ``|input - target|``, reduced by ``reduction``:
    ``F.l1_loss``."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities in [0, 1] against targets of the
    same shape and dtype: ``F.binary_cross_entropy(input, target, weight,
    reduction)`` (``weight`` broadcast to the input's shape)."""

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits (sigmoid folded in, computed stably):
    ``F.binary_cross_entropy_with_logits(input, target, weight, reduction,
    pos_weight)``; ``weight`` and ``pos_weight`` are buffers, as in PyTorch."""

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss (quadratic below ``beta``, linear above):
    ``F.smooth_l1_loss(input, target, reduction, beta)``."""

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Huber loss (quadratic below ``delta``, linear above):
    ``F.huber_loss(input, target, reduction, delta)``."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)
