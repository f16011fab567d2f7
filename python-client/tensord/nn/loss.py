"""The loss modules of ``tensord.nn``: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss.

Each takes its PyTorch namesake's constructor arguments (without the
deprecated ``size_average`` and ``reduce``) and calls the function of the
same name in ``tensord.nn.functional`` on ``forward(input, target)``, so
shapes, dtypes, reductions and errors are those functions'. A class weight is
a buffer named ``weight``, as in PyTorch; ``repr`` is PyTorch's.
"""
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss"]


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        F._check_reduction(reduction)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of unnormalised scores against class indices (int64) or
    class probabilities: ``F.cross_entropy(input, target, weight, ignore_index,
    reduction, label_smoothing)``. ``input`` [N, C] (or [C], or [N, C, d1, ...]);
    the result is a 0-dim tensor unless ``reduction='none'``. ValueError for a
    bad reduction."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities against int64 class
    indices: ``F.nll_loss(input, target, weight, ignore_index, reduction)``.
    ValueError for a bad reduction."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error ``(input - target)**2`` (broadcast, with PyTorch's
    warning when the shapes differ), reduced by ``reduction``:
    ``F.mse_loss``. ValueError for a bad reduction."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error ``|input - target|``, reduced by ``reduction``:
    ``F.l1_loss``. ValueError for a bad reduction."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)
