"""``tensord.nn.functional``: stateless layers and losses, as ``torch.nn.functional``.

Every function is either one op of the table run by the daemon (relu, gelu,
softmax, log_softmax, sigmoid, tanh) or a short composite of table ops
(linear, layer_norm, embedding, nll_loss, cross_entropy, mse_loss, dropout),
so autograd records it like any other computation and it works on meta
tensors wherever its ops do. Results equal PyTorch's up to floating-point
rounding (the composites may round differently from PyTorch's fused kernels).
"""
import warnings

from .. import _C
from ._util import detach

__all__ = ["relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "dropout", "layer_norm",
           "embedding", "nll_loss", "cross_entropy", "mse_loss", "l1_loss"]

_call = _C.call_any

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def relu(input, inplace=False):
    """max(input, 0) elementwise (op relu); ``inplace=True`` clamps ``input`` itself
    (op clamp_) and returns it."""
    if inplace:
        input.clamp_(min=0)
        return input
    return _call("relu", input)


def gelu(input, approximate="none"):
    """GELU, x * Phi(x) (op gelu); ``approximate='tanh'`` uses the tanh approximation.
    RuntimeError for another ``approximate``."""
    return _call("gelu", input, approximate=approximate)


def sigmoid(input):
    """1 / (1 + exp(-input)) elementwise (op sigmoid)."""
    return _call("sigmoid", input)


def tanh(input):
    """The hyperbolic tangent, elementwise (op tanh)."""
    return _call("tanh", input)


def _implicit_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim`` (op softmax.int); floating inputs only.
    ``dtype`` casts the input first. ``dim=None`` picks PyTorch's legacy
    implicit dim (0 for 0-, 1- and 3-D inputs, else 1) with a warning."""
    if dim is None:
        dim = _implicit_dim("softmax", input.dim())
    return _call("softmax", input, dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    """log(softmax(x)) along ``dim``, computed stably (op log_softmax.int). ``dim``
    and ``dtype`` as in softmax."""
    if dim is None:
        dim = _implicit_dim("log_softmax", input.dim())
    return _call("log_softmax", input, dim, dtype=dtype)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``: input [*, in], weight [out, in], bias [out] or None;
    gives [*, out]. RuntimeError when the inner sizes differ (from matmul)."""
    out = _call("matmul", input, _call("t", weight))
    if bias is not None:
        out = out + bias
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    """During training, zeroes each element with probability ``p`` (a fresh draw
    from the session's generator) and scales the rest by 1 / (1 - p); returns
    ``input`` unchanged when not training or p == 0. ValueError unless 0 <= p <= 1."""
    if not isinstance(p, (int, float)) or p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        if inplace:
            input.mul_(0.0)
            return input
        return input * 0.0
    keep = _call("rand_like", input) >= p
    scale = 1.0 / (1.0 - p)
    if inplace:
        input.mul_(keep).mul_(scale)
        return input
    return input * keep * scale


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the trailing dims ``normalized_shape``: (x - mean) / sqrt(var + eps)
    with the biased variance, then ``* weight + bias`` (each of shape
    normalized_shape, or None). RuntimeError when the input's trailing sizes
    differ from normalized_shape."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or input.dim() < k or tuple(input.shape[input.dim() - k:]) != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    dims = list(range(input.dim() - k, input.dim()))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` [num_embeddings, dim] picked by the integer tensor ``input``
    (any shape): gives [*input.shape, dim]. Positions equal to ``padding_idx``
    get their row but pass no gradient to it. max_norm, scale_grad_by_freq and
    sparse are not supported (NotImplementedError). RuntimeError for a
    non-integer ``input``; an index out of range fails in the daemon
    (index_select's error)."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("tensord embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    if str(input.dtype).rsplit(".", 1)[-1] not in ("int64", "int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {input.dtype} instead (while checking arguments for embedding)")
    num = weight.size(0)
    if padding_idx is not None:
        if padding_idx >= num or padding_idx < -num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            padding_idx += num
    out = _call("index_select", weight, 0, input.reshape(-1)).reshape(list(input.shape) + [weight.size(1)])
    if padding_idx is not None:
        keep = (input != padding_idx).unsqueeze(-1)
        out = _call("where", keep, out, detach(out))
    return out


def _class_dim(input):
    return 1 if input.dim() >= 2 else 0


def _check_targets(name, input, target):
    if input.dim() < 1:
        raise ValueError(f"{name}: expected input with at least 1 dimension (got 0)")
    cdim = _class_dim(input)
    expect = list(input.shape[:cdim]) + list(input.shape[cdim + 1:])
    if target.dtype._name != "int64":
        raise RuntimeError(f"{name}: expected target of dtype int64 (class indices), but found {target.dtype}")
    if list(target.shape) != expect:
        if input.dim() == 2 and target.dim() == 1:
            raise ValueError(f"Expected input batch_size ({input.size(0)}) to match target batch_size "
                             f"({target.size(0)}).")
        raise RuntimeError(f"{name}: size mismatch (got input: {list(input.shape)}, target: {list(target.shape)})")
    return cdim


def _picked_and_weights(input, target, weight, ignore_index, cdim):
    """(-input picked at each target class, per-position weights with ignored positions 0)."""
    valid = target != ignore_index
    safe = _call("where", valid, target, 0)
    picked = _call("gather", input, cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    if weight is not None:
        w = _call("index_select", weight, 0, safe.reshape(-1)).reshape(list(target.shape))
        w = _call("where", valid, w, 0.0)
    else:
        w = valid.to(input.dtype)
    return -picked * w, w


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of class indices: ``-input[n, target[n]] * weight[target[n]]``.

    Args:
        input: log-probabilities [N, C] (or [C], or [N, C, d1, ...]), floating.
        target: int64 class indices [N] (or [], or [N, d1, ...]) in [0, C) or
            equal to ``ignore_index`` (such positions contribute 0 and are not counted).
        weight: optional per-class weights [C].
        reduction: 'none' (per position), 'sum', or 'mean' (the sum divided by
            the total weight of the non-ignored positions, as PyTorch).

    Raises ValueError for a bad reduction or a batch-size mismatch,
    RuntimeError for non-int64 targets or mismatched shapes; a class index out
    of range fails in the daemon (gather's error).
    """
    _check_reduction(reduction)
    cdim = _check_targets("nll_loss", input, target)
    loss, w = _picked_and_weights(input, target, weight, ignore_index, cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross entropy of unnormalised scores against class indices:
    ``nll_loss(log_softmax(input, class dim), target, ...)``.

    ``input``: scores [N, C] (or [C], or [N, C, d1, ...]); ``target``: int64
    class indices, as nll_loss (weight, ignore_index, reduction too).
    ``label_smoothing`` in [0, 1] mixes in the uniform distribution over the C
    classes with PyTorch's formula: (1 - s) * nll + s / C * (the sum over
    classes of -log p, weighted by ``weight``, reduced like nll). ValueError
    for label_smoothing outside [0, 1].
    """
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    cdim = _check_targets("cross_entropy", input, target)
    logp = log_softmax(input, cdim)
    loss, w = _picked_and_weights(logp, target, weight, ignore_index, cdim)
    if reduction == "none":
        nll = loss
    elif reduction == "sum":
        nll = loss.sum()
    else:
        nll = loss.sum() / w.sum()
    if label_smoothing == 0.0:
        return nll
    n_classes = input.size(cdim)
    if weight is not None:
        shape = [1] * input.dim()
        shape[cdim] = n_classes
        smooth = -(logp * weight.reshape(shape)).sum(cdim)
    else:
        smooth = -logp.sum(cdim)
    valid = target != ignore_index
    smooth = _call("where", valid, smooth, 0.0)
    if reduction == "mean":
        denom = w.sum() if weight is not None else valid.sum()
        smooth = smooth.sum() / denom
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def mse_loss(input, target, reduction="mean"):
    """Mean squared error (input - target)**2 with broadcasting (a warning when the
    shapes differ, as PyTorch), reduced by ``reduction``."""
    _check_reduction(reduction)
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have "
                      "the same size.", stacklevel=2)
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, reduction="mean"):
    """Mean absolute error |input - target| with broadcasting, reduced by ``reduction``."""
    _check_reduction(reduction)
    return _reduce((input - target).abs(), reduction)


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):
    """Pads ``input`` as ``torch.nn.functional.pad``: ``pad`` is (before, after)
    pairs starting from the last dim (``(1, 2)`` pads the last dim by 1 in
    front and 2 behind; ``(1, 1, 2, 2)`` also pads the dim before it).
    Negative entries crop. Only ``mode="constant"`` is implemented (the op
    ``constant_pad_nd``, filling with ``value``, default 0, converted to
    input's dtype); "reflect", "replicate" and "circular" raise
    NotImplementedError, an unknown mode NotImplementedError as PyTorch.
    RuntimeError for an odd ``len(pad)``, more pairs than dims, a padded size
    below 1, or a value that input's dtype cannot hold. The output keeps
    input's memory format (channels-last stays channels-last)."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant":
        if value is not None:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        raise NotImplementedError(f'pad: mode "{mode}" is not implemented by tensord; only mode="constant" '
                                  "(constant_pad_nd) is supported")
    pad = list(pad)
    if len(pad) % 2 != 0:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length too large")
    return _call("constant_pad_nd", input, pad, 0 if value is None else value)


__all__ += ["pad"]
