"""``tensord.TensorMeta``: the metadata of a tensor as a plain, immutable value
(sizes, strides, storage_offset, dtype, device) with no data and no daemon,
for compilers, linters and tools that describe arguments without allocating::

    m = tensord.TensorMeta((2, 3), dtype=tensord.bfloat16)       # contiguous
    m.stride() == (3, 1); m.nbytes == 12
    t = m.to_tensor()                      # a meta tensor with exactly this layout
    tensord.TensorMeta.of(t) == m          # True
    m.to_dict()                            # {'shape': (2, 3), 'strides': (3, 1), 'dtype': 'bfloat16', ...}

The layout math (contiguous strides, the storage a layout needs and its
overflow check, is_contiguous, the checks of sizes, strides and offset) is
meta/'s, reached through ``_C._tensor_meta_layout``: a TensorMeta and a meta
tensor of the same layout cannot disagree, and no session is opened.

Also here: the data-less descriptors of tensors, ``Tensor.__dlpack_device__``,
``Tensor.__cuda_array_interface__`` (meta tensors only, storage at address 0) and
``Tensor.__tensord_array_interface__`` (any tensor; the dtype by name, so it
can say bfloat16 and float8, which a NumPy typestr cannot).
"""
import enum

from . import _C
from ._device import device as _device_cls
from ._dtype import BY_NAME, dtype as _dtype_cls
from ._size import Size

__all__ = ["TensorMeta", "DLDeviceType"]

# NumPy's array-interface type strings; bfloat16 and float8 have none.
_TYPESTR = {
    "bool": "|b1", "uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
}


class DLDeviceType(enum.IntEnum):
    """DLPack's device codes (dlpack.h), as torch's ``__dlpack_device__`` returns them."""
    kDLCPU = 1
    kDLCUDA = 2


class TensorMeta:
    """The metadata of one tensor, with no data: an immutable, hashable value.

    ``TensorMeta(shape, dtype=tensord.float32, strides=None, storage_offset=0, device="meta")``

    Args:
        shape: sizes (a sequence of non-negative ints; ``()`` for 0-dim).
        dtype: a ``tensord.dtype`` or its name (``"bfloat16"``, ``"float8_e4m3fn"``).
        strides: strides in elements (non-negative ints, as many as sizes);
            None gives the contiguous strides PyTorch gives (size-0 dims
            counted as 1).
        storage_offset: in elements, >= 0.
        device: ``"meta"`` (default), ``"cpu"``, ``"cuda:N"`` or a ``tensord.device``.

    Raises TypeError for arguments of the wrong type and RuntimeError, with
    PyTorch's words where PyTorch has them, for more than 64 dims, a negative
    size ("Trying to create tensor with negative dimension -1: [2, -1]"),
    strides of another length ("dimensionality of sizes (2) must match
    dimensionality of strides (1)"), negative strides or offset, an int beyond
    int64, or a layout whose storage (or element count, or contiguous strides)
    does not fit in int64 bytes — what ``empty_strided`` on meta refuses too.
    Every message starts with "TensorMeta: ". The checks and the numbers
    (strides, storage_nbytes, numel, is_contiguous) come from meta/, the code
    every meta tensor's layout comes from.

    Compared with ``==`` on all five fields (the device as its string), printed
    as ``TensorMeta(shape=(2, 3), strides=(3, 1), storage_offset=0,
    dtype=tensord.float32, device='meta')``. Build one from a tensor with
    ``TensorMeta.of(t)``; ``to_tensor()`` makes a tensor with exactly this
    layout (on meta: no daemon); ``to_dict()`` is the dtype-by-name
    descriptor (see ``Tensor.__tensord_array_interface__``).
    """

    # _device is set last: once it is, the value is frozen (__setattr__).
    __slots__ = ("_shape", "_strides", "_storage_offset", "_dtype", "_numel", "_storage_nbytes", "_is_contiguous",
                 "_device")

    def __init__(self, shape, dtype=None, strides=None, storage_offset=0, device="meta"):
        if dtype is None:
            dtype = BY_NAME["float32"]
        elif isinstance(dtype, str):
            if dtype not in BY_NAME:
                raise TypeError(f"TensorMeta: unknown dtype name {dtype!r} (expected one of {sorted(BY_NAME)})")
            dtype = BY_NAME[dtype]
        elif not isinstance(dtype, _dtype_cls):
            raise TypeError(f"TensorMeta: dtype must be a tensord.dtype or its name, not {type(dtype).__name__}")
        dev = device if isinstance(device, _device_cls) else _device_cls(device)
        # Checks the shape, strides and offset (types, then layout) and computes the rest.
        layout = _C._tensor_meta_layout(shape, strides, storage_offset, dtype, dev)
        self._shape = Size(layout["sizes"])
        self._strides = layout["strides"]
        self._storage_offset = int(storage_offset)
        self._dtype = dtype
        self._numel = layout["numel"]
        self._storage_nbytes = layout["storage_nbytes"]
        self._is_contiguous = layout["is_contiguous"]
        self._device = dev

    @classmethod
    def of(cls, tensor):
        """The metadata of a ``tensord.Tensor`` (any device; no sync point).
        TypeError for anything else."""
        from ._tensor import Tensor
        if not isinstance(tensor, Tensor):
            raise TypeError(f"TensorMeta.of expects a tensord.Tensor, got {type(tensor).__name__}")
        return cls(tuple(tensor.shape), dtype=tensor.dtype, strides=tuple(tensor.stride()),
                   storage_offset=tensor.storage_offset(), device=tensor.device)

    # ------------------------------------------------------------ fields
    @property
    def shape(self):
        """The sizes, a ``tensord.Size``."""
        return self._shape

    def size(self, dim=None):
        """``size()`` is ``shape``; ``size(dim)`` one size (negative dims count from the end)."""
        return self._shape if dim is None else self._shape[self._wrap(dim)]

    def stride(self, dim=None):
        """The strides in elements (a tuple), or one stride."""
        return self._strides if dim is None else self._strides[self._wrap(dim)]

    def storage_offset(self):
        """Offset of element [0, ..., 0] in its storage, in elements."""
        return self._storage_offset

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return self._device

    @property
    def ndim(self):
        return len(self._shape)

    def dim(self):
        return len(self._shape)

    def _wrap(self, dim):
        n = len(self._shape)
        if not -max(n, 1) <= dim < max(n, 1) or n == 0:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}], "
                             f"but got {dim})")
        return dim + n if dim < 0 else dim

    # ------------------------------------------------------------ derived
    def numel(self):
        """The number of elements (1 for 0-dim)."""
        return self._numel

    @property
    def itemsize(self):
        """Bytes per element."""
        return self._dtype.itemsize

    def element_size(self):
        return self._dtype.itemsize

    @property
    def nbytes(self):
        """Bytes of the elements: ``numel() * itemsize`` (as ``torch.Tensor.nbytes``)."""
        return self.numel() * self._dtype.itemsize

    @property
    def storage_nbytes(self):
        """Bytes the storage must hold for this view: (storage_offset + 1 +
        sum((size - 1) * stride)) * itemsize, or storage_offset * itemsize when
        a size is 0 (what ``empty_strided`` allocates, plus the offset).
        Computed by meta/ (``TensorMeta::StorageBytesNeeded``)."""
        return self._storage_nbytes

    def is_contiguous(self):
        """PyTorch's rule: row-major strides, ignoring dims of size 1; empty
        tensors are contiguous. Computed by meta/ (``TensorMeta::is_contiguous``)."""
        return self._is_contiguous

    # ------------------------------------------------------------ value semantics
    def _key(self):
        return (tuple(self._shape), self._strides, self._storage_offset, self._dtype._name, str(self._device))

    def __eq__(self, other):
        if not isinstance(other, TensorMeta):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __setattr__(self, name, value):
        if hasattr(self, "_device"):  # every slot is set: frozen
            raise AttributeError("TensorMeta is immutable")
        object.__setattr__(self, name, value)

    def __reduce__(self):
        return (TensorMeta, (tuple(self._shape), self._dtype._name, self._strides, self._storage_offset,
                             str(self._device)))

    def __repr__(self):
        return (f"TensorMeta(shape={tuple(self._shape)}, strides={self._strides}, "
                f"storage_offset={self._storage_offset}, dtype={self._dtype!r}, device='{self._device}')")

    # ------------------------------------------------------------ conversions
    def to_tensor(self):
        """A tensor with exactly this metadata, its storage zero-filled (none on
        meta, where no daemon is needed): ``tensord.empty_strided(shape,
        strides, dtype=, device=)``, and for a non-zero storage_offset
        ``empty_strided([2, *shape], [storage_offset, *strides])[1]``."""
        import tensord
        dev = str(self._device)
        if self._storage_offset == 0:
            return tensord.empty_strided(list(self._shape), list(self._strides), dtype=self._dtype, device=dev)
        base = tensord.empty_strided([2] + list(self._shape), [self._storage_offset] + list(self._strides),
                                     dtype=self._dtype, device=dev)
        return base.select(0, 1)

    def to_dict(self):
        """The dtype-by-name descriptor (what ``Tensor.__tensord_array_interface__``
        gives): a dict with ``shape`` (tuple), ``strides`` (tuple, in
        *elements*, always given), ``storage_offset`` (elements), ``dtype``
        (the name: 'float32', 'bfloat16', 'float8_e4m3fn', ...), ``itemsize``
        (bytes), ``device`` ('meta', 'cpu', 'cuda:0'), ``typestr`` (NumPy's
        '<f4', or None for bfloat16/float8) and ``version`` (1)."""
        return {
            "shape": tuple(self._shape),
            "strides": self._strides,
            "storage_offset": self._storage_offset,
            "dtype": self._dtype._name,
            "itemsize": self._dtype.itemsize,
            "device": str(self._device),
            "typestr": _TYPESTR.get(self._dtype._name),
            "version": 1,
        }

    @classmethod
    def from_dict(cls, d):
        """The inverse of ``to_dict()``; also reads the ``__cuda_array_interface__``
        form tensord exports (``typestr``, strides in bytes or None, ``data`` =
        (storage offset in bytes, read-only flag)) as a meta description.
        KeyError naming what is missing when ``d`` has neither ``dtype`` nor
        ``typestr``; TypeError for a typestr with no tensord dtype."""
        if "dtype" in d:
            return cls(d["shape"], dtype=d["dtype"], strides=d.get("strides"),
                       storage_offset=d.get("storage_offset", 0), device=d.get("device", "meta"))
        if "typestr" not in d:
            raise KeyError("TensorMeta.from_dict: the dict has neither 'dtype' (to_dict's form) nor 'typestr' "
                           f"(__cuda_array_interface__'s form); keys: {sorted(d)}")
        names = [n for n, t in _TYPESTR.items() if t == d["typestr"]]
        if not names:
            raise TypeError(f"TensorMeta.from_dict: no tensord dtype has typestr {d['typestr']!r}")
        itemsize = cls((), dtype=names[0]).itemsize
        strides = d.get("strides")
        if strides is not None:
            strides = tuple(s // itemsize for s in strides)
        data = d.get("data")
        offset = data[0] // itemsize if data else 0
        return cls(d["shape"], dtype=names[0], strides=strides, storage_offset=offset, device=d.get("device", "meta"))

    def cuda_array_interface(self):
        """The ``__cuda_array_interface__`` (version 3) form of a storage at
        address 0: ``{"shape", "typestr", "strides" (bytes, None when
        contiguous), "data": (storage_offset * itemsize, True), "version": 3}``
        (the data pointer is where the first element would be, so a view keeps
        its offset). TypeError for bfloat16 and float8, which have no typestr
        (use ``to_dict()``)."""
        typestr = _TYPESTR.get(self._dtype._name)
        if typestr is None:
            raise TypeError(f"{self._dtype!r} has no __cuda_array_interface__ typestr (NumPy has no such type); use "
                            f"__tensord_array_interface__ / TensorMeta.to_dict(), which names the dtype")
        item = self._dtype.itemsize
        strides = None if self.is_contiguous() else tuple(s * item for s in self._strides)
        return {"shape": tuple(self._shape), "typestr": typestr, "strides": strides,
                "data": (self._storage_offset * item, True), "version": 3}


# ---------------------------------------------------------------- Tensor members

def _dlpack_device(self):
    """``(device_type, device_id)`` per DLPack: ``(DLDeviceType.kDLCPU, 0)`` for
    cpu, ``(DLDeviceType.kDLCUDA, N)`` for cuda:N (the values are ints, 1 and
    2). A meta tensor raises ValueError("Unknown device type meta for
    Dlpack"), as torch 1.13 does: DLPack has no meta device. (The data
    itself lives in the daemon, so there is no ``__dlpack__``.)"""
    d = self.device
    if d.type == "cpu":
        return (DLDeviceType.kDLCPU, 0)
    if d.type == "cuda":
        return (DLDeviceType.kDLCUDA, d.index or 0)
    raise ValueError(f"Unknown device type {d.type} for Dlpack")


def _cuda_array_interface(self):
    """For a meta tensor: a ``__cuda_array_interface__`` (v3) dict with no data,
    ``{"shape", "typestr", "strides" (bytes; None when contiguous), "data":
    (storage_offset * itemsize, True), "version": 3}``: its storage sits at
    address 0 (see TensorMeta.cuda_array_interface).

    Other tensors raise AttributeError, as torch does for cpu tensors
    ("Can't get __cuda_array_interface__ on non-CUDA tensor ...") — tensord's
    data lives in the daemon's address space, so not even a cuda tensor has a
    pointer usable here. bfloat16 and float8 (no typestr) raise
    AttributeError too; ``__tensord_array_interface__`` names every dtype."""
    if not self.is_meta:
        raise AttributeError(f"Can't get __cuda_array_interface__ on a tensord tensor on {self.device}: only meta "
                             f"tensors give one (data pointer 0); the data lives in the daemon. Use "
                             f"__tensord_array_interface__ for the metadata")
    try:
        return TensorMeta.of(self).cuda_array_interface()
    except TypeError as e:
        raise AttributeError(str(e)) from None


def _tensord_array_interface(self):
    """The data-less descriptor of any tensor, with the dtype by name (it can
    say bfloat16, float8_e4m3fn and float8_e5m2): ``TensorMeta.of(self).to_dict()``,
    keys shape, strides (elements), storage_offset, dtype, itemsize, device,
    typestr (or None), version. Prefer it to ``__cuda_array_interface__``
    unless a consumer requires the latter."""
    return TensorMeta.of(self).to_dict()


def install(tensor_cls):
    """Adds ``__dlpack_device__``, ``__cuda_array_interface__`` and
    ``__tensord_array_interface__`` to ``Tensor``."""
    tensor_cls.__dlpack_device__ = _dlpack_device
    tensor_cls.__cuda_array_interface__ = property(_cuda_array_interface, doc=_cuda_array_interface.__doc__)
    tensor_cls.__tensord_array_interface__ = property(_tensord_array_interface, doc=_tensord_array_interface.__doc__)
