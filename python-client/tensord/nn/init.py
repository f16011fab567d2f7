"""``tensord.nn.init``: parameter initialisers, as ``torch.nn.init``.

Each initialiser fills its tensor in place in the daemon (ops uniform_,
normal_, fill_, zero_) under ``no_grad`` and returns the same tensor. Random
ones draw from the session's generator, so ``tensord.manual_seed(s)`` makes
them reproducible (the numbers differ from PyTorch's generator). On a meta
tensor every initialiser does nothing and returns it: modules can be built on
the meta device. The bounds and standard deviations follow PyTorch 1.13's
formulas (see each function).
"""
import math
import warnings

from ._util import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "kaiming_uniform_",
           "kaiming_normal_", "xavier_uniform_", "xavier_normal_"]

_LINEAR_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (PyTorch's table): 1 for linear,
    conv* and sigmoid; 5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + slope**2))
    for leaky_relu (slope ``param``, default 0.01); 3/4 for selu. ValueError
    for an unknown nonlinearity or a non-number slope."""
    if nonlinearity in _LINEAR_GAIN:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight of shape [out, in, *kernel]: in * prod(kernel)
    and out * prod(kernel). ValueError for fewer than 2 dims."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.size(1) * receptive, tensor.size(0) * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _skip(tensor):
    return tensor.is_meta


def uniform_(tensor, a=0.0, b=1.0):
    """Fills ``tensor`` with values drawn uniformly from [a, b); returns it."""
    if _skip(tensor):
        return tensor
    with no_grad():
        tensor.uniform_(a, b)
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    """Fills ``tensor`` with values drawn from N(mean, std**2); returns it."""
    if _skip(tensor):
        return tensor
    with no_grad():
        tensor.normal_(mean, std)
    return tensor


def constant_(tensor, val):
    """Fills ``tensor`` with ``val``; returns it."""
    if _skip(tensor):
        return tensor
    with no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    """Fills ``tensor`` with 1; returns it."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fills ``tensor`` with 0; returns it."""
    if _skip(tensor):
        return tensor
    with no_grad():
        tensor.zero_()
    return tensor


def _no_op_if_empty(tensor):
    if tensor.numel() == 0:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return True
    return False


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation, uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan),
    gain = calculate_gain(nonlinearity, a) and fan the fan_in or fan_out of
    ``mode``. ValueError for fewer than 2 dims or an unknown mode."""
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation, normal: N(0, std**2) with std = gain / sqrt(fan) (see kaiming_uniform_)."""
    if _no_op_if_empty(tensor):
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std)


def xavier_uniform_(tensor, gain=1.0):
    """Glorot initialisation, uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -math.sqrt(3.0) * std, math.sqrt(3.0) * std)


def xavier_normal_(tensor, gain=1.0):
    """Glorot initialisation, normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std)
