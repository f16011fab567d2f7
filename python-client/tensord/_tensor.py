"""The Python face of ``tensord.Tensor`` (the compiled ``_C.Tensor``):
properties, Python protocols, operators and indexing.

Every operator maps to an op of the table (``a + b`` is ``add``, ``a @ b`` is
``matmul``, ...) and goes through the C++ client like any other call;
``x[...]`` is translated by the C++ client into select/slice/unsqueeze/
index/masked_select calls.
"""
import numbers
import types

from . import _C
from ._device import device as _device_cls
from ._dtype import ALIASES, BY_CODE, BY_NAME
from ._formatting import tensor_repr
from ._size import Size

__all__ = ["Tensor", "install_tensor_api"]

Tensor = _C.Tensor
_call_method = _C.call_method
_call = _C.call


def _is_operand(x):
    """What binary operators accept: Tensors and Python/NumPy numbers."""
    return isinstance(x, (Tensor, int, float)) or isinstance(x, numbers.Number) or (
        type(x).__module__ == "numpy" and hasattr(x, "dtype") and getattr(x, "ndim", 1) == 0)


def _binary(op, dunder):
    # A C callable: calls op `op` as a method when `other` passes _is_operand
    # (checked in C for Tensors, ints and floats), else returns NotImplemented.
    # Named as the Tensor attribute `dunder` it becomes (name_tensor_members
    # gives it the __qualname__ pickle finds).
    fn = _C.OpFunction(op, "method", _is_operand)
    fn.__name__ = dunder
    fn.__doc__ = f"The Python operator for tensord op {op!r} (broadcasting, PyTorch type promotion)."
    return fn


def _scalar_tensor(value, like):
    """A 0-dim tensor holding a Python number, on ``like``'s device (dtype
    from the number: bool, int64 or float32, as PyTorch's full())."""
    return _call("full", [], value, device=like._device_str)


# ---------------------------------------------------------------- properties

def _shape(self):
    """The sizes as a ``tensord.Size`` (a tuple), known locally without a round trip."""
    return Size(self._sizes())


def _size(self, dim=None):
    """``size()`` is ``shape``; ``size(dim)`` is one size (negative dims count from
    the end; IndexError when out of range)."""
    if dim is None:
        return Size(self._sizes())
    return self._size_of(dim)


def _stride(self, dim=None):
    """The strides (in elements) as a tuple, or the stride of one dim."""
    if dim is None:
        return self._strides()
    return self._stride_of(dim)


def _dtype(self):
    """The element type (a ``tensord.dtype``, e.g. ``tensord.float32``)."""
    return BY_CODE[self._dtype_code]


def _device(self):
    """Where the tensor lives: ``device(type='cpu')``, ``device(type='meta')``, ..."""
    return _device_cls(self._device_str)


def _ndim(self):
    """The number of dimensions (same as ``dim()``)."""
    return self.dim()


def _T(self):
    """The tensor with its dims reversed (the transpose of a matrix); a view."""
    return _call_method("permute", self, list(range(self.dim() - 1, -1, -1)))


def _mT(self):
    """The tensor with its last two dims swapped (a batch of matrices
    transposed); a view. As PyTorch 1.13: a 0-dim tensor gives a view of
    itself, a 1-dim one RuntimeError."""
    if self.dim() == 0:
        return self.view(())
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.dim()}-D tensor.")
    return _call_method("transpose", self, -2, -1)


def _itemsize(self):
    """Bytes per element."""
    return self.dtype.itemsize


def _nbytes(self):
    """Bytes of the elements (numel() * itemsize)."""
    return self.numel() * self.dtype.itemsize


# ---------------------------------------------------------------- protocols

def _repr(self):
    """PyTorch's layout: ``tensor([[1., 2.],\\n        [3., 4.]])``; reads the data
    (a sync point) except for meta tensors, which print ``tensor(..., device='meta', size=(3, 4))``."""
    return tensor_repr(self)


def _len(self):
    if self.dim() == 0:
        raise TypeError("len() of a 0-d tensor")
    return self._sizes()[0]


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (_C.index(self, i) for i in range(self._sizes()[0]))


def _one_value(self, what):
    if self.numel() != 1:
        raise RuntimeError(f"only one element tensors can be converted to Python scalars (this one has {self.numel()} elements, {what})")
    return self.item()


def _bool(self):
    if self.numel() != 1 and not self.is_meta:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


def _float(self):
    return float(_one_value(self, "float()"))


def _int(self):
    return int(_one_value(self, "int()"))


def _index(self):
    if self.dtype.is_floating_point or self.dtype._name == "bool" or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return int(self.item())


def _array(self, dtype=None):
    a = self.numpy()
    return a if dtype is None else a.astype(dtype, copy=False)


def _format(self, spec):
    if self.dim() == 0 and not self.is_meta:
        return format(self.item(), spec)
    return format(repr(self), spec)


def _to_index_key(self, key):
    # Lists (and nested sequences) inside an index become tensors on self's
    # device, as PyTorch treats them: x[[0, 2]] is advanced indexing.
    if type(key) is tuple:
        for k in key:
            if isinstance(k, list):
                break
        else:
            return key  # no list inside: the key as it is (the common case)
    elif not isinstance(key, (list, tuple)):
        return key
    from ._creation import tensor as _tensor

    def conv(k):
        if isinstance(k, list):
            return _tensor(k, device=self._device_str)
        return k
    if isinstance(key, tuple):
        return tuple(conv(k) for k in key)
    return conv(key)


def _getitem(self, key):
    """``x[key]`` with PyTorch's semantics: ints select (IndexError when out of range),
    slices (with steps) and None/Ellipsis give views, integer tensors and lists do
    advanced indexing (index.Tensor), bool tensors select by mask (masked_select,
    whose output depends on data: NotImplementedError on meta tensors)."""
    return _C.index(self, _to_index_key(self, key))


def _is_basic_key(key):
    items = key if isinstance(key, tuple) else (key,)
    return all(k is None or k is Ellipsis or isinstance(k, (int, slice)) for k in items) and \
        not any(isinstance(k, bool) for k in items)


def _consumed_dims(k):
    """How many dims of the indexed tensor an index item uses (PyTorch's rule:
    a bool mask uses as many as it has, None and Ellipsis none)."""
    if k is None or k is Ellipsis:
        return 0
    if isinstance(k, Tensor) and k.dtype._name in ("bool", "uint8"):
        return max(k.dim(), 1)
    return 1


def _advanced_setitem(self, key, value):
    # x[key] = value with tensor/mask items: the basic items (ints, slices,
    # None) give a view of self with a full slice where each tensor item was;
    # then index_put on that view with the tensor items (None for the other
    # dims), copied back into the view, so self's storage is written.
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumed_dims(k) for k in items)
    if used > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    basic, indices = [], []
    for k in items:
        if k is Ellipsis:
            n = self.dim() - used
            basic.extend([slice(None)] * n)
            indices.extend([None] * n)
        elif isinstance(k, Tensor):
            basic.extend([slice(None)] * _consumed_dims(k))
            indices.append(k)
        elif isinstance(k, slice) or k is None:
            basic.append(k)
            indices.append(None)
        else:  # an int: selects, so its dim leaves the view
            basic.append(k)
    view = _C.index(self, tuple(basic))
    if isinstance(value, Tensor):
        values = value   # PyTorch does not cast here: index_put refuses another dtype ...
        tensors = [k for k in items if isinstance(k, Tensor)]
        if len(tensors) == 1 and tensors[0].dtype._name in ("bool", "uint8") and values.dim() == 0:
            values = values.to(view.dtype)   # ... except for one mask and one value: masked_fill, which casts
    elif _is_operand(value):
        values = _call("full", [], value, dtype=view.dtype, device=view._device_str)
    else:
        raise TypeError(f"can't assign a {type(value).__name__} to a tensord Tensor")
    _call_method("copy_", view, _call("index_put", view, indices, values))


def _strip_leading_ones(value):
    """``value`` without its leading size-1 dims (a view), as PyTorch's
    __setitem__ does before writing, so x[0] = t with t of shape [1] works."""
    k = 0
    while k < value.dim() and value.shape[k] == 1:
        k += 1
    return _C.index(value, (0,) * k) if k else value


def _records_grad(self, value):
    return _C.is_grad_enabled() and (self.requires_grad or (isinstance(value, Tensor) and value.requires_grad))


def _setitem_recorded(self, items, value):
    """x[key] = value while autograd records x or value: the write goes to x
    itself (copy_ of an out-of-place index_put), never through a view, which
    the daemon's autograd cannot rebase. Handles keys made only of integer /
    bool tensors and full slices (``x[idx]``, ``x[mask]``, ``x[:, idx]``) and
    keys made only of ints and slices (turned into broadcast arange indices,
    as numpy.ix_). Gradients: zero for the overwritten elements of x, the
    (summed, broadcast) incoming gradient for value."""
    # Ellipsis -> full slices.
    if any(k is Ellipsis for k in items):
        i = next(j for j, k in enumerate(items) if k is Ellipsis)
        used = sum(_consumed_dims(k) for k in items)
        items = items[:i] + [slice(None)] * (self.dim() - used) + items[i + 1:]
    if any(k is None for k in items):
        raise NotImplementedError("x[key] = value with None (newaxis) in the key is not supported while recording "
                                  "gradients; drop the None or run it under no_grad()")
    if isinstance(value, Tensor):
        value = _strip_leading_ones(value)
    full = slice(None)
    tensors = [k for k in items if isinstance(k, Tensor)]
    if tensors and all(isinstance(k, Tensor) or k == full for k in items):
        indices = []
        for k in items:
            if isinstance(k, Tensor):
                indices.append(k)
            else:
                indices.append(None)
        if isinstance(value, Tensor):
            if len(tensors) == 1 and tensors[0].dtype._name in ("bool", "uint8") and value.dim() == 0:
                value = value.to(self.dtype)   # PyTorch fills through masked_fill here, which casts
        else:
            value = _call("full", [], value, dtype=self.dtype, device=self._device_str)
        _call_method("copy_", self, _call("index_put", self, indices, value))
        return
    if tensors:
        raise NotImplementedError("x[key] = value mixing index tensors with ints or partial slices is not supported "
                                  "while recording gradients; index in two steps or run it under no_grad()")
    # Only ints and slices: one arange per dim, shaped to broadcast as an outer
    # product (the int dims are 0-dim indices and leave the result).
    if len(items) > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    items = items + [full] * (self.dim() - len(items))
    kept = [d for d, k in enumerate(items) if isinstance(k, slice)]
    indices = []
    for d, k in enumerate(items):
        if isinstance(k, slice):
            start, stop, step = k.indices(self.shape[d])
            if step <= 0:
                raise ValueError("step must be greater than zero")
            idx = _call("arange.start", start, max(stop, start), step, dtype=BY_NAME["int64"],
                        device=self._device_str)
            shape = [1] * len(kept)
            shape[kept.index(d)] = idx.shape[0]
            indices.append(idx.view(shape))
        else:
            size = self.shape[d]
            if not -size <= k < size:
                raise IndexError(f"index {k} is out of bounds for dimension {d} with size {size}")
            indices.append(_call("full", [], k, dtype=BY_NAME["int64"], device=self._device_str))
    if isinstance(value, Tensor):
        value = value.to(self.dtype)          # basic keys copy, which casts
    else:
        value = _call("full", [], value, dtype=self.dtype, device=self._device_str)
    _call_method("copy_", self, _call("index_put", self, indices, value))


def _setitem(self, key, value):
    """``x[key] = value`` with PyTorch's semantics. Basic keys (ints, slices,
    None, Ellipsis) write ``value`` (a number, or a Tensor broadcast to the
    indexed shape, any dtype) into the view ``x[key]`` with fill_/copy_.
    Advanced keys (integer tensors, lists, bool masks, mixed with basic items)
    write through index_put on the basic view, then copy_ back, so views of
    ``x`` see the change; a Tensor value must have x's dtype (RuntimeError
    otherwise, as PyTorch) except for a single mask with a one-element value
    (PyTorch's masked_fill, which casts); a number is converted to it. Leading
    size-1 dims of a Tensor value are dropped first, as PyTorch does. While
    autograd records x or value, the write goes to x itself (see
    _setitem_recorded: keys of index tensors and full slices, or of ints and
    slices; others raise NotImplementedError). Works on meta (no data is
    needed). IndexError for too many indices, TypeError for a
    value that is neither a Tensor nor a number; an integer index out of
    range is an IndexError raised at the next sync point (any data read or
    synchronize()), naming this line."""
    key = _to_index_key(self, key)
    if _records_grad(self, value):
        _setitem_recorded(self, list(key) if isinstance(key, tuple) else [key], value)
        return
    if isinstance(value, Tensor):
        value = _strip_leading_ones(value)
    if not _is_basic_key(key):
        _advanced_setitem(self, key, value)
        return
    view = _C.index(self, key)
    if isinstance(value, Tensor):
        _call_method("copy_", view, value)
    elif _is_operand(value):
        _call_method("fill_", view, value)
    else:
        raise TypeError(f"can't assign a {type(value).__name__} to a tensord Tensor")


# ---------------------------------------------------------------- autograd

def _requires_grad_get(self):
    """Whether gradients are recorded for this tensor. Settable on leaves
    (``x.requires_grad = True``); RuntimeError for a non-leaf set to False and for
    non-floating dtypes set to True."""
    return self._requires_grad


def _requires_grad_set(self, value):
    if not isinstance(value, bool):
        raise TypeError(f"requires_grad must be a bool, not {type(value).__name__}")
    self._set_requires_grad(value)


def _requires_grad_(self, requires_grad=True):
    """Sets ``requires_grad`` in place and returns ``self`` (see the property)."""
    self._set_requires_grad(bool(requires_grad))
    return self


def _grad_get(self):
    """The gradient accumulated by ``backward()`` (a Tensor in the daemon), or None.

    The same object is returned until a backward replaces the gradient
    (``p.grad is p.grad``); in-place changes to it (``p.grad.zero_()``) change
    the gradient itself. For a non-leaf without ``retain_grad()`` it is None
    (with a UserWarning, as PyTorch)."""
    g = self._grad_tensor()
    d = self.__dict__
    if g is None:
        d.pop("_grad_obj", None)
        if self._requires_grad and not self.is_leaf and not self.retains_grad:
            import warnings
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                          "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                          "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.",
                          UserWarning, stacklevel=2)
        return None
    cached = d.get("_grad_obj")
    if cached is not None and cached._impl_id == g._impl_id:
        return cached
    d["_grad_obj"] = g
    return g


def _grad_set(self, value):
    """``x.grad = g``: g must have x's shape, dtype and device (RuntimeError
    otherwise) or be None."""
    if value is not None and not isinstance(value, Tensor):
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
    self._set_grad(value)
    if value is None:
        self.__dict__.pop("_grad_obj", None)
    else:
        self.__dict__["_grad_obj"] = value


def _grad_del(self):
    _grad_set(self, None)


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Computes the gradient of this tensor with respect to the graph's leaves and
    accumulates it into their ``.grad`` (see ``tensord.autograd.backward``).
    ``gradient`` may be omitted only for a tensor of one element."""
    from .autograd import backward
    backward(self, None if gradient is None else [gradient], retain_graph, create_graph, inputs)


def _data_get(self):
    """The tensor without its autograd history: ``self.detach()`` (shares data)."""
    return _call_method("detach", self)


def _data_set(self, value):
    raise NotImplementedError("tensord: assigning to .data is not supported (the handle cannot be rebound); "
                              "use `with tensord.no_grad(): t.copy_(value)` instead")


# ---------------------------------------------------------------- conversions

def _make_cast(name):
    def fn(self):
        return _call_method("to", self, target)
    target = ALIASES.get(name) or BY_NAME[name]
    fn.__name__ = name
    fn.__doc__ = f"``self.to({target!r})``: converts the elements (an alias when the dtype is already {target!r})."
    return fn


def _cpu(self):
    """``self.to('cpu')``."""
    return _call_method("to", self, "cpu")


def _cuda(self, device=None, non_blocking=False):
    """``self.to('cuda:N')``, as ``torch.Tensor.cuda``: ``device`` is an int
    ``N``, a name or a ``tensord.device`` of type cuda; None is the current
    CUDA device, which in tensord is always cuda:0. Returns ``self`` when it
    is there already. ``non_blocking`` changes nothing: the copy is ordered
    in the session's stream like every op, and only reading values waits.
    ValueError for a device that is not a CUDA one; RuntimeError, at this
    call, when the daemon has no such device (naming why, e.g. no NVIDIA
    driver)."""
    if device is None:
        target = "cuda:0"
    elif isinstance(device, int) and not isinstance(device, bool):
        target = f"cuda:{device}"
    else:
        d = device if isinstance(device, _device_cls) else _device_cls(device)
        if d.type != "cuda":
            raise ValueError(f"Invalid device, must be cuda device (got {d})")
        target = f"cuda:{0 if d.index is None else d.index}"
    return _call_method("to", self, target)


def _is_cuda(self):
    """True when the tensor is on a CUDA device (``torch.Tensor.is_cuda``)."""
    return self._device_str.startswith("cuda")


def _is_cpu(self):
    """True when the tensor is on the CPU (``torch.Tensor.is_cpu``)."""
    return self._device_str == "cpu"


def _get_device(self):
    """The device index of a CUDA (or other indexed) tensor, -1 for a CPU or
    meta tensor (which have no device index), as ``torch.Tensor.get_device``."""
    d = _device_cls(self._device_str)
    return -1 if d.index is None else d.index


def _element_size(self):
    """Bytes per element."""
    return self.dtype.itemsize


def _type_as(self, other):
    """``self.to(other.dtype)``."""
    return _call_method("to", self, other.dtype)


def _daemon_meta(self):
    """(testing) The metadata the daemon holds for this tensor, as a dict; a sync point."""
    return _C._daemon_meta(self)


def install_tensor_api():
    """Attaches the Python protocols, properties and operators to ``Tensor``."""
    T = Tensor
    T.__module__ = "tensord"
    T.shape = property(_shape, doc=_shape.__doc__)
    T.dtype = property(_dtype, doc=_dtype.__doc__)
    T.device = property(_device, doc=_device.__doc__)
    T.ndim = property(_ndim, doc=_ndim.__doc__)
    T.T = property(_T, doc=_T.__doc__)
    T.mT = property(_mT, doc=_mT.__doc__)
    T.itemsize = property(_itemsize, doc=_itemsize.__doc__)
    T.nbytes = property(_nbytes, doc=_nbytes.__doc__)
    T.size = _size
    T.stride = _stride
    T.element_size = _element_size
    T.type_as = _type_as
    T.cpu = _cpu
    T.cuda = _cuda
    T.is_cuda = property(_is_cuda, doc=_is_cuda.__doc__)
    T.is_cpu = property(_is_cpu, doc=_is_cpu.__doc__)
    T.get_device = _get_device
    for name in ("float", "double", "half", "long", "int", "short", "bool", "bfloat16"):
        setattr(T, name, _make_cast(name))
    T.__repr__ = _repr
    T.__str__ = _repr
    T.__format__ = _format
    T.__len__ = _len
    T.__iter__ = _iter
    T.__bool__ = _bool
    T.__float__ = _float
    T.__int__ = _int
    T.__index__ = _index
    T.__array__ = _array
    T.__array_priority__ = 1000
    T.__array_ufunc__ = None  # NumPy defers to our reflected operators
    T.__getitem__ = _getitem
    T.__setitem__ = _setitem
    T.__hash__ = object.__hash__

    # Arithmetic: every operator is an op of the table.
    T.__add__ = _binary("add", "__add__")
    T.__radd__ = _binary("add", "__radd__")
    T.__sub__ = _binary("sub", "__sub__")
    T.__mul__ = _binary("mul", "__mul__")
    T.__rmul__ = _binary("mul", "__rmul__")
    T.__truediv__ = _binary("div", "__truediv__")
    T.__mod__ = _binary("remainder", "__mod__")
    T.__pow__ = _binary("pow", "__pow__")
    T.__matmul__ = _binary("matmul", "__matmul__")
    T.__and__ = _binary("bitwise_and", "__and__")
    T.__rand__ = _binary("bitwise_and", "__rand__")
    T.__or__ = _binary("bitwise_or", "__or__")
    T.__ror__ = _binary("bitwise_or", "__ror__")
    T.__xor__ = _binary("bitwise_xor", "__xor__")
    T.__rxor__ = _binary("bitwise_xor", "__rxor__")
    T.__lshift__ = _binary("bitwise_left_shift", "__lshift__")
    T.__rshift__ = _binary("bitwise_right_shift", "__rshift__")
    T.__eq__ = _binary("eq", "__eq__")
    T.__ne__ = _binary("ne", "__ne__")
    T.__lt__ = _binary("lt", "__lt__")
    T.__le__ = _binary("le", "__le__")
    T.__gt__ = _binary("gt", "__gt__")
    T.__ge__ = _binary("ge", "__ge__")

    def __rsub__(self, other):
        """``other - self`` (the op rsub)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("rsub", self, other)

    def __rtruediv__(self, other):
        """``other / self`` as ``reciprocal(self) * other`` (integer tensors give float32)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("mul", _call_method("reciprocal", self), other)

    def __floordiv__(self, other):
        """``self // other``: floor division (rounds toward -inf; dtype by PyTorch promotion)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("floor_divide", self, other)

    def __rfloordiv__(self, other):
        """``other // self``."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("floor_divide", _scalar_tensor(other, self), self)

    def __rmod__(self, other):
        """``other % self`` (remainder with the sign of the divisor)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("remainder", _scalar_tensor(other, self), self)

    def __rlshift__(self, other):
        """``other << self`` (bitwise_left_shift; integer tensors only)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("bitwise_left_shift", _scalar_tensor(other, self), self)

    def __rrshift__(self, other):
        """``other >> self`` (bitwise_right_shift; integer tensors only)."""
        if not _is_operand(other):
            return NotImplemented
        return _call_method("bitwise_right_shift", _scalar_tensor(other, self), self)

    def __rpow__(self, other):
        """``other ** self`` (the op pow.Scalar)."""
        if not _is_operand(other):
            return NotImplemented
        return _call("pow", other, self)

    def __rmatmul__(self, other):
        """``other @ self`` for a Tensor ``other``."""
        if not isinstance(other, Tensor):
            return NotImplemented
        return _call_method("matmul", other, self)

    def __neg__(self):
        """``-self`` (the op neg)."""
        return _call_method("neg", self)

    def __pos__(self):
        """``+self``: the tensor itself."""
        return self

    def __abs__(self):
        """``abs(self)`` (the op abs)."""
        return _call_method("abs", self)

    def __invert__(self):
        """``~self``: bitwise NOT (logical NOT for bool tensors). TypeError for
        a floating tensor, as PyTorch's ``~``."""
        if self.dtype.is_floating_point:
            raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
        return _call_method("bitwise_not", self)

    for f in (__rsub__, __rtruediv__, __floordiv__, __rfloordiv__, __rmod__, __rpow__, __rmatmul__, __neg__,
              __pos__, __abs__, __invert__, __rlshift__, __rrshift__):
        setattr(T, f.__name__, f)
    T._daemon_meta = _daemon_meta
    T.requires_grad = property(_requires_grad_get, _requires_grad_set, doc=_requires_grad_get.__doc__)
    T.requires_grad_ = _requires_grad_
    T.grad = property(_grad_get, _grad_set, _grad_del, doc=_grad_get.__doc__)
    T.backward = _backward
    T.data = property(_data_get, _data_set, doc=_data_get.__doc__)
    # Data-less descriptors: __dlpack_device__, __cuda_array_interface__ (meta
    # only), __tensord_array_interface__ (see _meta_value.py).
    from ._meta_value import install as _install_descriptors
    _install_descriptors(T)


def install_op_overrides(T):
    """Run after the op table's methods are installed: ``Tensor.to(other)``
    (a Tensor) means ``to(other.device, other.dtype, ...)``, as in PyTorch;
    every other form goes to the table's ``to`` overloads unchanged."""
    op_to = T.to

    def to(self, *args, **kwargs):
        if args and isinstance(args[0], Tensor):
            other = args[0]
            return op_to(self, other.device, other.dtype, *args[1:], **kwargs)
        other = kwargs.pop("other", None)
        if isinstance(other, Tensor):
            return op_to(self, other.device, other.dtype, *args, **kwargs)
        if other is not None:
            kwargs["other"] = other
        return op_to(self, *args, **kwargs)
    to.__name__ = "to"
    to.__qualname__ = "Tensor.to"
    to.__doc__ = (op_to.__doc__ or "") + ("\n\n``to(other, non_blocking=False, copy=False)`` with a Tensor "
                                          "``other`` converts to other's device and dtype (PyTorch's to.other).")
    T.to = to


def name_tensor_members(T):
    """Gives every function attribute of ``T`` (Python functions and op
    functions) the ``__module__`` and ``__qualname__`` under which it is
    found, ``tensord`` and ``Tensor.<name>``, as a method of a class defined
    there has, so that pickle and copy find it again (``Tensor.__neg__``,
    ``Tensor.float``, ``Tensor.norm``). A function already named where it is
    found keeps its name. Run once every member is installed."""
    for name, member in list(vars(T).items()):
        if not isinstance(member, (types.FunctionType, _C.OpFunction)):
            continue
        qualname = getattr(member, "__qualname__", None)
        owner, _, attr = (qualname or "").rpartition(".")
        if getattr(member, "__module__", None) == "tensord" and owner == "Tensor" and vars(T).get(attr) is member:
            continue
        member.__qualname__ = f"Tensor.{name}"
        member.__module__ = "tensord"
