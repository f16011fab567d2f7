"""The layers of ``tensord.nn``: Linear, activations, containers, Dropout, Embedding, LayerNorm,
Conv2d, MaxPool2d, AvgPool2d, RMSNorm.

Each takes the same constructor arguments as its PyTorch namesake (including
``device=`` and ``dtype=`` for layers with parameters; parameters are
created on the innermost ``with tensord.device(...)`` when ``device`` is
None), initialises its parameters with PyTorch's distributions in
``reset_parameters`` (no-ops on meta), and prints the same ``repr``.
"""
import collections
import math
import operator

from . import functional as F
from . import init
from ._util import no_grad, tensord_module
from .module import Module
from .parameter import Parameter

__all__ = ["Identity", "Linear", "ReLU", "GELU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Flatten",
           "Sequential", "ModuleList", "Dropout", "Embedding", "LayerNorm", "Conv2d", "MaxPool2d", "AvgPool2d",
           "RMSNorm"]


def _empty(shape, device, dtype):
    return tensord_module().empty(list(shape), device=device, dtype=dtype)


class Identity(Module):
    """Returns its input unchanged (any arguments to the constructor are ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``: input [*, in_features] -> [*, out_features].

    Parameters: ``weight`` [out_features, in_features] and ``bias``
    [out_features] (None with ``bias=False``), initialised as PyTorch's
    Linear: weight by kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(in),
    1/sqrt(in)), bias by U(-1/sqrt(in), 1/sqrt(in)).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_empty((out_features, in_features), device, dtype))
        if bias:
            self.bias = Parameter(_empty((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draws weight and bias from PyTorch's Linear distributions (nothing on meta)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class ReLU(Module):
    """max(x, 0) elementwise; ``inplace=True`` modifies the input."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """GELU activation; ``approximate='tanh'`` for the tanh approximation."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    """The logistic sigmoid 1 / (1 + exp(-x)), elementwise (shape and dtype kept)."""

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """The hyperbolic tangent, elementwise (shape and dtype kept)."""

    def forward(self, input):
        return F.tanh(input)


class Softmax(Module):
    """Softmax along ``dim`` (see functional.softmax)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax) along ``dim`` (see functional.log_softmax)."""

    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Flatten(Module):
    """Flattens dims ``start_dim``..``end_dim`` into one (op flatten)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Sequential(Module):
    """Modules applied one after another: ``Sequential(m0, m1, ...)`` (children named
    '0', '1', ...) or ``Sequential(OrderedDict(name=module, ...))``.

    Supports ``len``, iteration, ``seq[i]`` (negative too; IndexError out of
    range), ``seq[a:b]`` (a new Sequential of the same modules), ``append``.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def _index(self, idx):
        n = len(self)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return idx % n

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(collections.OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[self._index(idx)]

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[self._index(idx)]
        setattr(self, key, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, list(self._modules.keys())[self._index(idx)])

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Adds ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


class ModuleList(Module):
    """A list of modules registered as children '0', '1', ...: indexing, ``len``,
    iteration, ``append``, ``extend``. It has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        n = len(self)
        idx = operator.index(idx)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return self._modules[str(idx % n)]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        """Adds ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        """Appends every module of an iterable; returns self."""
        for m in modules:
            self.append(m)
        return self


class Dropout(Module):
    """During training, zeroes elements with probability ``p`` and scales the rest by
    1 / (1 - p); the identity in eval mode. ValueError unless 0 <= p <= 1."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Embedding(Module):
    """A lookup table: integer indices of any shape -> rows of ``weight``
    [num_embeddings, embedding_dim], giving [*indices.shape, embedding_dim].

    ``weight`` is initialised from N(0, 1) (the ``padding_idx`` row, if any,
    with zeros; that row receives no gradient). ``_weight`` supplies the
    initial weight instead. max_norm, scale_grad_by_freq and sparse are
    accepted only at their defaults (NotImplementedError otherwise).
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("tensord Embedding: max_norm, scale_grad_by_freq and sparse are not supported")
        if padding_idx is not None:
            if padding_idx >= num_embeddings or padding_idx < -num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                padding_idx += num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(_empty((num_embeddings, embedding_dim), device, dtype))
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        """Draws weight from N(0, 1) and zeroes the padding row (nothing on meta)."""
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None and not self.weight.is_meta:
            td = tensord_module()
            row = (td.arange(self.num_embeddings, device=self.weight.device) == self.padding_idx).unsqueeze(1)
            with no_grad():
                self.weight.masked_fill_(row, 0.0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class LayerNorm(Module):
    """Layer normalisation over the trailing dims ``normalized_shape`` (see
    functional.layer_norm), with learnable ``weight`` (ones) and ``bias``
    (zeros) of that shape when ``elementwise_affine``."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_empty(self.normalized_shape, device, dtype))
            self.bias = Parameter(_empty(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """weight = 1, bias = 0 (nothing on meta)."""
        if self.elementwise_affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    """2-D convolution (see functional.conv2d): input [N, in_channels, H, W] or
    [in_channels, H, W] -> [N, out_channels, H_out, W_out].

    Parameters: ``weight`` [out_channels, in_channels / groups, kH, kW] and
    ``bias`` [out_channels] (None with ``bias=False``), initialised as
    PyTorch's Conv2d: weight by kaiming_uniform_(a=sqrt(5)), bias by
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels / groups * kH * kW.
    ``padding``: an int, a pair, 'valid' or 'same' (stride 1 only).
    ValueError (PyTorch's words) for groups <= 0, channels not divisible by
    groups, a bad padding string or 'same' with a stride; only
    ``padding_mode='zeros'`` is supported (NotImplementedError otherwise).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _pair(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], "
                             f"but got padding_mode='{padding_mode}'")
        if padding_mode != "zeros":
            raise NotImplementedError(f"tensord Conv2d: padding_mode='{padding_mode}' is not supported (only 'zeros')")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.transposed = False
        self.output_padding = (0, 0)
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(_empty((out_channels, in_channels // groups) + self.kernel_size, device, dtype))
        if bias:
            self.bias = Parameter(_empty((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draws weight and bias from PyTorch's Conv2d distributions (nothing on meta)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class MaxPool2d(Module):
    """2-D max pooling (see functional.max_pool2d); ``stride`` None means
    ``kernel_size``; ``return_indices=True`` returns (values, indices)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """2-D average pooling (see functional.avg_pool2d); ``stride`` None means ``kernel_size``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing dims ``normalized_shape``
    (see functional.rms_norm; PyTorch 2.4's RMSNorm), with a learnable
    ``weight`` (ones) of that shape when ``elementwise_affine``. ``eps`` None
    means finfo(input.dtype).eps."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(_empty(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        """weight = 1 (nothing on meta)."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
