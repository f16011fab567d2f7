"""``tensord.optim``: optimizers whose updates run in the daemon, as ``torch.optim``.

Each ``step()`` issues in-place ops (add_, mul_, addcmul_, addcdiv_, ...)
on the parameters under no_grad; optimizer state (momentum buffers, Adam's
moments) consists of daemon tensors. Steps equal PyTorch 1.13's
(single-tensor implementations) up to floating-point rounding.
"""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
