"""tensord dtypes: ``tensord.float32``, ``tensord.int64``, ... (as ``torch.dtype``).

The list of dtypes, their names, sizes and kinds comes from the compiled
client (meta/dtype.h); this module only gives them Python objects.
"""
from . import _C

__all__ = ["dtype"]


class dtype:
    """The element type of a tensor, like ``torch.dtype``.

    Instances are singletons exported by the package: ``tensord.float32``
    (alias ``tensord.float``), ``tensord.float64`` (``double``),
    ``tensord.float16`` (``half``), ``tensord.bfloat16``, ``tensord.int64``
    (``long``), ``tensord.int32`` (``int``), ``tensord.int16`` (``short``),
    ``tensord.int8``, ``tensord.uint8``, ``tensord.bool``,
    ``tensord.float8_e4m3fn`` and ``tensord.float8_e5m2``.

    Attributes:
        itemsize: bytes per element (int).
        is_floating_point: True for float16/bfloat16/float32/float64/float8_*.
        is_signed: False for bool and uint8.

    float8 (as in PyTorch 2.x): storage and conversion only. ``to()`` from a
    wider type rounds to nearest even; float8_e4m3fn has no infinity, so
    values that round past 448 (and +-inf) become NaN; float8_e5m2 overflows
    to +-inf past 57344. Arithmetic raises RuntimeError ('"add" not
    implemented for 'Float8_e4m3fn''), and so does implicit promotion with
    any other dtype ("Promotion for Float8 Types is not supported, attempted
    to promote Float8_e4m3fn and Float"); convert explicitly (``t.float()``). ``numpy()`` raises TypeError (NumPy has no float8).

    ``repr(tensord.float32) == 'tensord.float32'``. dtypes cannot be created
    by users; ``dtype(...)`` raises TypeError.
    """

    __slots__ = ("_code", "_name", "itemsize", "is_floating_point", "is_signed", "_c10")

    def __new__(cls, *args, **kwargs):
        raise TypeError("cannot create tensord.dtype instances; use tensord.float32, tensord.int64, ...")

    @classmethod
    def _make(cls, code, name, itemsize, is_floating, is_signed, c10):
        self = object.__new__(cls)
        self._code = code
        self._name = name
        self.itemsize = itemsize
        self.is_floating_point = is_floating
        self.is_signed = is_signed
        self._c10 = c10
        return self

    def __repr__(self):
        return "tensord." + self._name

    __str__ = __repr__

    def __reduce__(self):
        return (_by_name, (self._name,))

    def to_numpy(self):
        """The matching ``numpy.dtype``; TypeError for bfloat16 and float8 (NumPy has none)."""
        import numpy as np

        if self._name in _NOT_IN_NUMPY:
            raise TypeError(f"NumPy has no dtype for {self!r}")
        return np.dtype(self._name)


_NOT_IN_NUMPY = {"bfloat16", "float8_e4m3fn", "float8_e5m2"}

# code -> dtype, name -> dtype (canonical names only).
BY_CODE = [dtype._make(*row) for row in _C.dtypes()]
BY_NAME = {d._name: d for d in BY_CODE}

# PyTorch's aliases; resolved through the C++ parser so both sides agree.
ALIASES = {}
for _alias in ("float", "double", "half", "long", "int", "short"):
    ALIASES[_alias] = BY_CODE[_C.parse_dtype(_alias)]


def _by_name(name):
    return BY_NAME[name]


def from_numpy_dtype(np_dtype):
    """The tensord dtype of a NumPy dtype; TypeError for those tensord lacks,
    ValueError for a non-native byte order (both as torch.from_numpy)."""
    name = np_dtype.name
    d = BY_NAME.get(name)
    if d is not None and not np_dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. "
                         "Conversion between byte orders is currently not supported.")
    if d is None:
        supported = ", ".join(sorted(n for n in BY_NAME if n not in _NOT_IN_NUMPY))
        raise TypeError(f"can't convert np.ndarray of type numpy.{name}. The only supported types are: {supported}.")
    return d
