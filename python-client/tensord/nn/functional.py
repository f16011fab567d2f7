"""``tensord.nn.functional``: stateless layers and losses, as ``torch.nn.functional``.

Every function is either one op of the table run by the daemon (relu, gelu,
softmax, log_softmax, sigmoid, tanh) or a short composite of table ops
(linear, layer_norm, embedding, nll_loss, cross_entropy, mse_loss, dropout),
so autograd records it like any other computation and it works on meta
tensors wherever its ops do. Results equal PyTorch's up to floating-point
rounding (the composites may round differently from PyTorch's fused kernels).
"""
import math
import warnings

from .. import _C
from ._util import detach

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "dropout", "layer_norm",
           "embedding", "nll_loss", "cross_entropy", "mse_loss", "l1_loss", "conv2d", "max_pool2d",
           "max_pool2d_with_indices", "avg_pool2d", "rms_norm", "scaled_dot_product_attention"]

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


def _named(name):
    """Errors raised inside a composite (built of table ops) name the composite
    first: ``scaled_dot_product_attention: matmul: size mismatch, ...``, so a
    user (and ``tensord check``) sees which function they called. The
    exception keeps its type."""
    def wrap(fn):
        def composite(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except (RuntimeError, IndexError, ValueError) as e:
                text = str(e)
                if text.startswith(name + ":") or text.startswith(name + "("):
                    raise
                try:
                    err = type(e)(f"{name}: {text}")
                except Exception:  # noqa: BLE001 - an exception type with another constructor: keep it
                    raise e from None
                raise err from e
        composite.__name__ = fn.__name__
        composite.__qualname__ = fn.__qualname__
        composite.__doc__ = fn.__doc__
        composite.__wrapped__ = fn
        return composite
    return wrap


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


def silu(input, inplace=False):
    """SiLU (swish), x * sigmoid(x), elementwise (op silu); same shape, dtype and
    layout as the input. ``inplace=True`` writes the result into ``input`` and
    returns it."""
    out = _call("silu", input)
    if inplace:
        return input.copy_(out)
    return out


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
    gives [*, out] (contiguous), through the table op ``linear`` (PyTorch 1.13's
    decomposition: addmm for a 2-D input with a bias, else matmul and an added
    bias). RuntimeError when the inner sizes or the dtypes differ."""
    return _call("linear", input, weight, bias)


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


@_named("layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalises over the trailing dims ``normalized_shape``: (x - mean) / sqrt(var + eps)
    with the biased variance, then ``* weight + bias`` (each of shape
    normalized_shape, or None). RuntimeError when the input's trailing sizes,
    or weight's or bias's shape, differ from normalized_shape."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or input.dim() < k or tuple(input.shape[input.dim() - k:]) != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != normalized_shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                               f"{list(t.shape)} and normalized_shape = {list(normalized_shape)}")
    dims = list(range(input.dim() - k, input.dim()))
    input = input.contiguous()   # PyTorch's layer_norm returns a contiguous result for any input layout
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


@_named("embedding")
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


def _check_class_weight(name, weight, n_classes):
    """PyTorch's rule: a class weight is a 1-D tensor of n_classes elements."""
    if weight is not None and (weight.dim() != 1 or weight.numel() != n_classes):
        raise RuntimeError(f"{name}: weight tensor should be defined either for all {n_classes} classes or "
                           f"no classes but got weight tensor of shape: {list(weight.shape)}")


def _picked_and_weights(input, target, weight, ignore_index, cdim):
    """(-input picked at each target class, per-position weights with ignored positions 0)."""
    _check_class_weight("nll_loss", weight, input.size(cdim))
    valid = target != ignore_index
    safe = _call("where", valid, target, 0)
    picked = _call("gather", input, cdim, safe.unsqueeze(cdim)).squeeze(cdim)
    if weight is not None:
        w = _call("index_select", weight, 0, safe.reshape(-1)).reshape(list(target.shape))
        w = _call("where", valid, w, 0.0)
    else:
        w = valid.to(input.dtype)
    return -picked * w, w


def _mean_over(total, denom):
    """``total / denom`` for a 'mean' over weights (0-dim tensors), as PyTorch's
    nll_loss kernel: NaN when ``denom`` is 0 (every position ignored), with a
    zero gradient then instead of 0 * inf = NaN (one fully padded batch must
    not poison the parameters)."""
    zero = denom == 0
    nan = _call("where", zero, float("nan"), 0.0)
    if nan.dtype != total.dtype:
        nan = nan.to(total.dtype)
    return total / _call("where", zero, 1.0, denom) + nan


@_named("nll_loss")
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
    RuntimeError for non-int64 targets, mismatched shapes or a weight that is
    not [C]; a class index out of range fails in the daemon (gather's error).
    """
    _check_reduction(reduction)
    cdim = _check_targets("nll_loss", input, target)
    loss, w = _picked_and_weights(input, target, weight, ignore_index, cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return _mean_over(loss.sum(), w.sum())


@_named("cross_entropy")
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Cross entropy of unnormalised scores against class indices:
    ``nll_loss(log_softmax(input, class dim), target, ...)``.

    ``input``: scores [N, C] (or [C], or [N, C, d1, ...]); ``target``: int64
    class indices, as nll_loss (weight, ignore_index, reduction too).
    ``label_smoothing`` in [0, 1] mixes in the uniform distribution over the C
    classes with PyTorch's formula: (1 - s) * nll + s / C * (the sum over
    classes of -log p, weighted by ``weight``, reduced like nll). RuntimeError
    for label_smoothing outside [0, 1] (PyTorch's type).

    Probability targets: a floating ``target`` of the input's shape holds
    class probabilities; the loss per position is ``-sum_c weight[c] *
    target[c] * log_softmax(input)[c]`` (target smoothed to ``(1 - s) *
    target + s / C`` first); 'mean' divides the sum by the number of
    positions (input.numel() / C), not by the weights, as PyTorch.
    RuntimeError for a non-floating target or an ``ignore_index`` >= 0 with
    probability targets (PyTorch's rule), or a weight that is not [C].
    """
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if input.dim() >= 1 and tuple(input.shape) == tuple(target.shape):
        return _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing)
    cdim = _check_targets("cross_entropy", input, target)
    logp = log_softmax(input, cdim)
    loss, w = _picked_and_weights(logp, target, weight, ignore_index, cdim)
    if reduction == "none":
        nll = loss
    elif reduction == "sum":
        nll = loss.sum()
    else:
        nll = _mean_over(loss.sum(), w.sum())
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
        smooth = _mean_over(smooth.sum(), denom)
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


@_named("mse_loss")
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


@_named("l1_loss")
def l1_loss(input, target, reduction="mean"):
    """Mean absolute error |input - target| with broadcasting, reduced by ``reduction``."""
    _check_reduction(reduction)
    return _reduce((input - target).abs(), reduction)


def _cross_entropy_probs(input, target, weight, ignore_index, reduction, label_smoothing):
    """cross_entropy with class-probability targets (PyTorch's cross_entropy_loss_prob_target)."""
    if not target.dtype.is_floating_point:
        raise RuntimeError(f"Expected floating point type for target with class probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    cdim = _class_dim(input)
    n_classes = input.size(cdim)
    _check_class_weight("cross_entropy", weight, n_classes)
    if label_smoothing > 0.0 and n_classes:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    logp = log_softmax(input, cdim)
    prod = logp * target
    if weight is not None:
        shape = [1] * input.dim()
        shape[cdim] = n_classes
        prod = prod * weight.reshape(shape)
    loss = -prod.sum(cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    count = input.numel() // n_classes if n_classes else 0
    return loss.sum() / float(count) if count else loss.sum() / 0.0


# ---------------------------------------------------------------- convolution, pooling

def _pair(v):
    if isinstance(v, int):
        return [v, v]
    return [int(x) for x in v]


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (op conv2d): ``input`` [N, C_in, H, W] or [C_in, H, W],
    ``weight`` [C_out, C_in / groups, kH, kW], ``bias`` [C_out] or None;
    float32/float64. ``stride``, ``padding``, ``dilation``: an int or a pair.

    ``padding='valid'`` is no padding; ``padding='same'`` pads so the output
    has the input's spatial size (stride must be 1: RuntimeError otherwise,
    as PyTorch); when the total padding d*(k-1) of a dim is odd, the extra
    zero goes on the right/bottom, as PyTorch does. RuntimeError for any other
    string ("Invalid padding string: 'foo'") and for the shape errors of the op.
    """
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if any(s != 1 for s in _pair(stride)):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            dil = _pair(dilation)
            if weight.dim() != 4:
                return _call("conv2d", input, weight, bias, stride, 0, dilation, groups)  # the op's error
            ks = list(weight.shape[2:])
            total = [d * (k - 1) for d, k in zip(dil, ks)]
            left = [t // 2 for t in total]
            for i, (t, lft) in enumerate(zip(total, left)):
                extra = t - 2 * lft
                if extra:
                    dim = input.dim() - 2 + i
                    zeros = _call("zeros_like", _call("narrow", input, dim, 0, 1))
                    zeros = _call("expand", zeros, [extra if j == dim else s for j, s in enumerate(input.shape)])
                    input = _call("cat", [input, zeros], dim)
            padding = left
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    return _call("conv2d", input, weight, bias, stride, padding, dilation, groups)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    """2-D max pooling returning (values, indices) (op max_pool2d_with_indices):
    ``input`` [N, C, H, W] or [C, H, W] (float32/float64); ``stride`` None means
    ``kernel_size``; indices are flat h * W + w positions in each input plane.
    RuntimeError (PyTorch's words) when padding exceeds half the kernel or the
    output would be empty."""
    if stride is None:
        stride = []
    return _call("max_pool2d_with_indices", input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """2-D max pooling (op max_pool2d_with_indices); returns the values, or
    (values, indices) with ``return_indices=True``. Arguments and errors as
    max_pool2d_with_indices."""
    values, indices = max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)
    return (values, indices) if return_indices else values


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-D average pooling (op avg_pool2d): ``input`` [N, C, H, W] or [C, H, W]
    (float32/float64); ``stride`` None means ``kernel_size``. Each window is
    divided by ``divisor_override`` when given (RuntimeError for 0), else by
    its size with padding (``count_include_pad``) or without."""
    if stride is None:
        stride = []
    return _call("avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


# ---------------------------------------------------------------- rms_norm, attention

# torch.finfo(dtype).eps, by dtype name.
_EPS = {"float32": 1.1920928955078125e-07, "float64": 2.220446049250313e-16, "float16": 0.0009765625,
        "bfloat16": 0.0078125, "float8_e4m3fn": 0.125, "float8_e5m2": 0.25}


@_named("rms_norm")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the trailing dims ``normalized_shape``
    (PyTorch 2.4's F.rms_norm): ``input * rsqrt(mean(input**2) + eps)``, then
    ``* weight`` (shape normalized_shape) when given. ``eps`` None means
    finfo(input.dtype).eps. Floating input; RuntimeError when the trailing
    sizes differ from normalized_shape (layer_norm's message)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or input.dim() < k or tuple(input.shape[input.dim() - k:]) != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"rms_norm: expected a floating input, but got {input.dtype}")
    if eps is None:
        eps = _EPS.get(input.dtype._name, _EPS["float32"])
    dims = list(range(input.dim() - k, input.dim()))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * weight
    return out


@_named("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """Attention ``softmax(query @ key^T * scale + mask) @ value`` (PyTorch 2.x's
    F.scaled_dot_product_attention).

    Shapes: query [..., L, E], key [..., S, E], value [..., S, Ev] (batch dims
    broadcast) -> [..., L, Ev]. ``scale`` None means 1 / sqrt(E). ``attn_mask``
    broadcasting to [..., L, S]: bool keeps positions where True (others get
    -inf before the softmax), floating is added to the scores.
    ``is_causal=True`` keeps key positions s <= l (top-left aligned lower
    triangle); giving both it and attn_mask is a RuntimeError, as PyTorch.
    ``dropout_p`` > 0 drops attention weights with dropout (the session's
    generator). A row whose every position is masked gives NaN, as PyTorch's
    math path.
    """
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    e = query.size(-1)
    if scale is None:
        scale = 1.0 / math.sqrt(e) if e > 0 else float("inf")
    scores = _call("matmul", query, _call("transpose", key, -2, -1)) * scale
    if is_causal:
        n_q, n_k = query.size(-2), key.size(-2)
        rows = _call("arange", n_q, device=query.device).unsqueeze(-1)
        cols = _call("arange", n_k, device=query.device)
        attn_mask = cols <= rows
    if attn_mask is not None:
        if attn_mask.dtype._name == "bool":
            scores = _call("where", attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return _call("matmul", weights, value)


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
