"""``tensord.nn``: modules, parameters, functional layers and initialisers, as ``torch.nn``.

``nn.utils`` clips gradients (clip_grad_norm_, clip_grad_value_).
Modules hold Parameters (tensord tensors: their data lives in the daemon);
forward passes are ops streamed to the daemon, recorded by its autograd
engine; ``tensord.optim`` updates the parameters in place in the daemon.
Modules built inside ``with tensord.device("meta"):`` have meta parameters
and need no daemon until ``to_empty(device=...)``.
"""
from . import functional, init, utils
from .layers import (GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear, LogSoftmax, ModuleList, ReLU,
                     Sequential, Sigmoid, Softmax, Tanh)
from .layers import AvgPool2d, Conv2d, MaxPool2d, RMSNorm
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss,
                   SmoothL1Loss)
from .containers import ModuleDict, ParameterDict, ParameterList
from .module import Module
from .parameter import Parameter

__all__ = ["Module", "Parameter", "Identity", "Linear", "ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax",
           "Flatten", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Dropout", "Embedding", "LayerNorm", "functional", "init",
           "Conv2d", "MaxPool2d", "AvgPool2d", "RMSNorm", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
           "BCELoss", "BCEWithLogitsLoss", "SmoothL1Loss", "HuberLoss", "utils"]
