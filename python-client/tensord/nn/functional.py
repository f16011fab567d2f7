"""``tensord.nn.functional``: stateless layers and losses, as ``torch.nn.functional``.

Every function is either one op of the table run by the daemon (relu, gelu,
softmax, log_softmax, sigmoid, tanh) or a short composite of table ops
(linear, layer_norm, embedding, nll_loss, cross_entropy, mse_loss, dropout,
one_hot, binary_cross_entropy(_with_logits), smooth_l1_loss, huber_loss),
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
           "max_pool2d_with_indices", "avg_pool2d", "rms_norm", "scaled_dot_product_attention", "one_hot",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss"]

_call = _C.call_any

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average, reduce, stacklevel):
    """PyTorch's reading of the deprecated size_average and reduce flags
    (None counts as True): both -> 'mean', reduce alone -> 'sum', else
    'none'; warns as PyTorch does (``stacklevel`` as warnings.warn's, counted
    from the caller of this function)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        reduction = "mean"
    else:
        reduction = "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{reduction}' instead.",
                  stacklevel=stacklevel + 1)
    return reduction


def _reduction_of(size_average, reduce, reduction):
    """The reduction a loss function runs: ``reduction`` (checked: ValueError
    for another string), or the legacy flags' reading when either is given
    (with PyTorch's warning, pointing at the line that called the loss
    function: this, the function, and its ``_named`` wrapper lie between)."""
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce, stacklevel=4)
    _check_reduction(reduction)
    return reduction


def _warn_if_broadcast(input, target):
    """PyTorch's warning for an elementwise loss whose target shape differs
    from the input's (the two broadcast); it points at the line that called
    the loss function (through its ``_named`` wrapper)."""
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have "
                      "the same size.", stacklevel=4)


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


def one_hot(tensor, num_classes=-1):
    """One-hot encoding of class indices, as PyTorch 1.13's F.one_hot.

    ``tensor``: int64 class indices of any shape [*]; the result is int64
    [*, num_classes] with a 1 at each index and 0 elsewhere (no gradient).

    ``num_classes=-1`` takes ``tensor.max() + 1``: that reads the data, so it
    is a sync point (one round trip, which also checks that no value is
    negative: RuntimeError "Class values must be non-negative."), and
    RuntimeError for a meta tensor ("Can not infer total number of classes
    from meta tensor.") or an empty one. A given ``num_classes`` needs no
    round trip (it works on meta tensors too, where PyTorch raises): the
    result is ``zeros([*, num_classes]).scatter(-1, tensor.unsqueeze(-1), 1)``,
    so a value that is negative or not below num_classes is scatter's
    RuntimeError ("index 5 is out of bounds for dimension 1 with size 3"),
    raised at the next sync point (PyTorch's CUDA behaviour; its CPU kernel
    checks at once). RuntimeError for a non-int64 ``tensor`` ("one_hot is
    only applicable to index tensor.") and for num_classes 0 or below -1
    with a non-empty tensor ("Class values must be smaller than
    num_classes."); TypeError for a num_classes that is not an int.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int):
        raise TypeError(f"one_hot(): argument 'num_classes' (position 2) must be int, not "
                        f"{type(num_classes).__name__}")
    if tensor.dtype._name != "int64":
        raise RuntimeError("one_hot is only applicable to index tensor.")
    shape = list(tensor.shape)
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        return _call("zeros", shape + [num_classes], dtype=tensor.dtype, device=tensor.device)
    if num_classes == -1:
        if tensor.is_meta:
            raise RuntimeError("Can not infer total number of classes from meta tensor.")
        low, high = _call("stack", [tensor.min(), tensor.max()]).tolist()   # the one round trip
        if low < 0:
            raise RuntimeError("Class values must be non-negative.")
        num_classes = high + 1
    elif num_classes <= 0:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = _call("zeros", shape + [num_classes], dtype=tensor.dtype, device=tensor.device)
    return _call("scatter", out, -1, tensor.unsqueeze(-1), 1)


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
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices: ``-input[n, target[n]] * weight[target[n]]``.

    Args:
        input: log-probabilities [N, C] (or [C], or [N, C, d1, ...]), floating.
        target: int64 class indices [N] (or [], or [N, d1, ...]) in [0, C) or
            equal to ``ignore_index`` (such positions contribute 0 and are not counted).
        weight: optional per-class weights [C].
        reduction: 'none' (per position), 'sum', or 'mean' (the sum divided by
            the total weight of the non-ignored positions, as PyTorch).
        size_average, reduce: PyTorch's deprecated flags, in PyTorch's
            argument order; given, they set the reduction (with its warning).

    Raises ValueError for a bad reduction or a batch-size mismatch,
    RuntimeError for non-int64 targets, mismatched shapes or a weight that is
    not [C]; a class index out of range fails in the daemon (gather's error).
    """
    reduction = _reduction_of(size_average, reduce, reduction)
    cdim = _check_targets("nll_loss", input, target)
    loss, w = _picked_and_weights(input, target, weight, ignore_index, cdim)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return _mean_over(loss.sum(), w.sum())


@_named("cross_entropy")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
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
    reduction = _reduction_of(size_average, reduce, reduction)
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
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error (input - target)**2 with broadcasting (a warning when the
    shapes differ, as PyTorch), reduced by ``reduction`` (or by PyTorch's
    deprecated ``size_average``/``reduce``, with its warning)."""
    reduction = _reduction_of(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    d = input - target
    return _reduce(d * d, reduction)


@_named("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error |input - target| with broadcasting, reduced by
    ``reduction`` (or by PyTorch's deprecated ``size_average``/``reduce``,
    with its warning)."""
    reduction = _reduction_of(size_average, reduce, reduction)
    return _reduce((input - target).abs(), reduction)


def _clamped_log(x):
    """``max(log(x), -100)`` as PyTorch's binary_cross_entropy kernel, with a
    finite gradient: ``1 / x`` where the log is above -100, else 0 (at x = 0
    the log's gradient is never formed, so no 0 * inf = NaN)."""
    zero = x == 0
    return _call("where", zero, -100.0, _call("clamp_min", _call("log", _call("where", zero, 1.0, x)), -100.0))


@_named("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross entropy of probabilities, as PyTorch 1.13's
    F.binary_cross_entropy: ``-weight * (target * log(input) + (1 - target)
    * log(1 - input))`` per element, each log clamped below at -100 (so an
    input of exactly 0 or 1 gives a finite loss, as PyTorch).

    Args:
        input: probabilities in [0, 1], any shape, floating.
        target: the same shape and dtype as ``input``, values in [0, 1].
        weight: optional, broadcast to ``input``'s shape (a rescaling per element).
        size_average, reduce: PyTorch's deprecated flags; given, they set the
            reduction (with PyTorch's warning).
        reduction: 'none' (input's shape), 'mean' or 'sum' (0-dim).

    Gradients flow to input, target and weight (PyTorch 1.13 refuses a
    weight that requires grad) and equal PyTorch's for inputs with
    ``input * (1 - input)`` of at least 1e-12 (PyTorch floors that
    denominator at 1e-12; tensord's gradient is the exact one's, so for an
    input such as 1e-13 the two differ). At an input of exactly 0 or 1 they are the clamped
    expression's, finite: 0 through a clamped log (PyTorch's formula
    ``(input - target) / max(input * (1 - input), 1e-12)`` gives -+1e12
    there, and +-inf to the target) and +-1 through the other (PyTorch: 0
    when the input equals the target).

    Raises ValueError for a bad reduction or when target's shape differs from
    input's, RuntimeError when their dtypes differ ("Found dtype Long but
    expected Float") or weight does not broadcast to input. Not as PyTorch:
    an input or target outside [0, 1] is not checked (that needs the data,
    a round trip); it gives NaN or a meaningless loss instead of
    PyTorch's RuntimeError.
    """
    reduction = _reduction_of(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}) "
                         "is deprecated. Please ensure they have the same size.")
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {target.dtype._c10} but expected {input.dtype._c10}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f'"binary_cross_entropy" not implemented for \'{input.dtype._c10}\'')
    loss = (target - 1) * _clamped_log(1 - input) - target * _clamped_log(input)
    if weight is not None:
        loss = loss * _call("expand", weight, list(input.shape))
    return _reduce(loss, reduction)


@_named("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """Binary cross entropy of unnormalised scores (logits), as PyTorch 1.13's
    F.binary_cross_entropy_with_logits: ``binary_cross_entropy(sigmoid(input),
    target)`` computed stably (PyTorch's formula, with ``m = max(-input, 0)``:
    ``(1 - target) * input + l * (log(exp(-m) + exp(-input - m)) + m)`` where
    ``l = (pos_weight - 1) * target + 1``, then ``* weight``).

    Args:
        input: logits, any shape, floating.
        target: the same shape as ``input``, floating (values in [0, 1]).
        weight: optional, broadcast with the loss (a rescaling per element).
        size_average, reduce: PyTorch's deprecated flags (see binary_cross_entropy).
        reduction: 'none' (input's shape), 'mean' or 'sum' (0-dim).
        pos_weight: optional weight of the positive term, broadcast with
            target (e.g. [C] for the last dim's C classes).

    Gradients flow to input, target, weight and pos_weight. Raises ValueError
    for a bad reduction or when target's shape differs from input's
    ("Target size (...) must be the same as input size (...)"),
    RuntimeError for a non-floating input or target (PyTorch's "result type
    Float can't be cast to the desired output type Long") or when weight or
    pos_weight does not broadcast.
    """
    reduction = _reduction_of(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    for t in (target, input):
        if not t.dtype.is_floating_point:
            raise RuntimeError(f"result type Float can't be cast to the desired output type {t.dtype._c10}")
    max_val = _call("clamp_min", -input, 0.0)
    log_term = ((-max_val).exp() + (-input - max_val).exp()).log()
    if pos_weight is not None:
        log_weight = (pos_weight - 1) * target + 1
        loss = (1 - target) * input + log_weight * (log_term + max_val)
    else:
        loss = (1 - target) * input + max_val + log_term
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _quadratic_inside(d, z, bound, scale, outside):
    """``d * d * scale`` where ``z = |d| < bound``, else ``outside`` (smooth_l1
    and huber). The square sees 0 outside, so that an infinite d gets the
    outside part's gradient, not 0 * inf = NaN from the branch not taken."""
    inside = z < bound
    dq = _call("where", inside, d, 0.0)
    return _call("where", inside, dq * dq * scale, outside)


@_named("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 loss, as PyTorch 1.13's F.smooth_l1_loss: with ``z = |input -
    target|`` (broadcast, with PyTorch's warning when the shapes differ),
    ``0.5 * z**2 / beta`` where ``z < beta``, else ``z - 0.5 * beta``;
    ``beta == 0`` is l1_loss. Reduced by ``reduction`` ('none', 'mean',
    'sum'; size_average and reduce are PyTorch's deprecated flags). The
    gradient is ``(input - target) / beta`` inside, ``sign(input - target)``
    outside, as PyTorch's; with ``beta == 0`` it is 0 where input == target
    (as l1_loss's), where PyTorch 1.13's kernel gives -1 to both input and
    target.

    Raises ValueError for a bad reduction, RuntimeError for a negative beta
    ("smooth_l1_loss does not support negative values for beta.") or shapes
    that do not broadcast.
    """
    _warn_if_broadcast(input, target)
    reduction = _reduction_of(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = input - target
    z = d.abs()
    if beta == 0.0:
        return _reduce(z, reduction)
    loss = _quadratic_inside(d, z, beta, 0.5 / beta, z - 0.5 * beta)
    return _reduce(loss, reduction)


@_named("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0):
    """Huber loss, as PyTorch 1.13's F.huber_loss: with ``z = |input - target|``
    (broadcast, with PyTorch's warning when the shapes differ), ``0.5 * z**2``
    where ``z < delta``, else ``delta * (z - 0.5 * delta)`` (smooth_l1_loss
    times delta, for delta = beta). Reduced by ``reduction`` ('none',
    'mean', 'sum'). The result has the input's dtype, as PyTorch's (computed
    in the dtype ``input`` and ``target`` promote to).

    Raises ValueError for a bad reduction, RuntimeError for delta <= 0
    ("huber_loss does not support non-positive values for delta.") or shapes
    that do not broadcast.
    """
    _warn_if_broadcast(input, target)
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = input - target
    z = d.abs()
    loss = _quadratic_inside(d, z, delta, 0.5, (z - 0.5 * delta) * delta)
    if loss.dtype != input.dtype:
        # PyTorch's huber_loss computes in the promoted dtype into an output
        # of the input's dtype (smooth_l1_loss keeps the promoted one).
        loss = loss.to(input.dtype)
    return _reduce(loss, reduction)


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
