"""``tensord.save`` / ``tensord.load``: tensors in the safetensors format.

A flat dict of tensors (a ``state_dict()``) is stored as its tensors, under
its keys. Any other structure of dicts, lists and tuples holding tensors,
numbers, strings, bools and None (an optimizer's ``state_dict()``, a
checkpoint ``{"model": ..., "optimizer": ..., "epoch": 3}``) is stored as
its tensors, named by their path (``optimizer.state.0.exp_avg``), plus
the structure itself as JSON in ``"__metadata__"`` under the key
``TREE_KEY``; ``load`` rebuilds it. Other safetensors readers see the
tensors under those names.

The file layout is the safetensors specification:

- 8 bytes: N, the length of the header, an unsigned 64-bit little-endian integer;
- N bytes: a UTF-8 JSON object. Each key is a tensor name whose value is
  ``{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}``; the
  optional key ``"__metadata__"`` maps strings to strings. The writer pads the
  header with spaces (0x20) so that 8 + N is a multiple of 8;
- the data region: every tensor's elements, row-major (C-contiguous),
  little-endian, at ``[begin, end)`` relative to the start of this region. The
  tensors tile the region exactly: no gaps, no overlaps.

dtype names: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3 (float8
e4m3fn) and F8_E5M2. Files written here are readable by every safetensors
reader, and files from any safetensors writer whose dtypes tensord has are
read here.

``load(path, map_location="meta")`` reads only the 8-byte length and the
header: it gives meta tensors of the stored shapes and dtypes, so a file's
layout can be inspected (or a meta model checked against it) without reading,
or even having, its data.
"""
import collections
import io
import json
import os
import struct
import sys

import numpy as np

from . import _C
from ._device import device as _device_cls
from ._dtype import BY_NAME

__all__ = ["save", "load", "load_metadata", "SAFETENSORS_DTYPES", "TREE_KEY"]

# The "__metadata__" key that holds a nested object's structure (see save).
TREE_KEY = "tensord.tree"

# tensord dtype name -> safetensors dtype name.
SAFETENSORS_DTYPES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint8": "U8",
    "bool": "BOOL",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
}
_FROM_SAFETENSORS = {v: k for k, v in SAFETENSORS_DTYPES.items()}
# safetensors dtypes that exist in the format but not in tensord (named in errors).
_UNSUPPORTED = {"U16", "U32", "U64", "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64"}

_HEADER_LIMIT = 100 * 1000 * 1000  # the reference reader refuses headers above 100 MB


def _little(np_dtype):
    return np.dtype(np_dtype).newbyteorder("<")


# float8 e4m3fn: every byte's value, to encode float32 values that came from e4m3fn exactly.
def _e4m3fn_values():
    codes = np.arange(256, dtype=np.uint32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp = (codes >> 3) & 0xF
    man = codes & 0x7
    normal = (1.0 + man / 8.0) * np.power(2.0, exp.astype(np.float64) - 7)
    sub = (man / 8.0) * 2.0 ** -6
    vals = sign * np.where(exp == 0, sub, normal)
    vals[(codes & 0x7F) == 0x7F] = np.nan
    return vals


def _encode_bytes(t):
    """The little-endian, row-major bytes of a real tensor (a sync point)."""
    if hasattr(t, "detach"):
        t = t.detach()
    name = t.dtype._name
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        # NumPy has no such dtypes: the client decodes them to float32 (exactly),
        # and the bit patterns are re-encoded here.
        f = np.ascontiguousarray(t._host_array(), dtype=np.float32).reshape(-1)
        if name == "bfloat16":
            bits = (f.view(np.uint32) >> 16).astype(_little(np.uint16))
            return bits.tobytes()
        if name == "float8_e5m2":
            # e5m2 values are float16 values; their top byte is the e5m2 code.
            h = f.astype(np.float16).view(np.uint16)
            return (h >> 8).astype(np.uint8).tobytes()
        # e4m3fn: codes 0x00..0x7E hold the non-negative finite values in increasing order.
        positive = _e4m3fn_values()[:0x7F]
        mag = np.abs(f.astype(np.float64))
        code = np.minimum(np.searchsorted(positive, mag), 0x7E)
        bad = ~np.isnan(f) & (positive[code] != mag)
        if bad.any():
            raise RuntimeError(f"save: value {f[bad][0]} is not a float8_e4m3fn value")
        code = np.where(np.isnan(f), 0x7F, code).astype(np.uint8)
        return (code | np.where(np.signbit(f), 0x80, 0).astype(np.uint8)).tobytes()
    arr = t.numpy()
    return np.ascontiguousarray(arr, dtype=_little(arr.dtype)).tobytes()


def _check_tensor(name, v):
    if v.is_meta and not _zeros_for_meta:
        raise RuntimeError(f"save: tensor {name!r} is on the meta device and has no data to save; "
                           "materialise it first (e.g. Module.to_empty + reset_parameters)")
    if v.dtype._name not in SAFETENSORS_DTYPES:
        raise TypeError(f"save: tensor {name!r} has dtype {v.dtype!r}, which safetensors cannot hold")


def _is_flat(obj):
    """True for a mapping whose keys are all str and values all tensors."""
    return isinstance(obj, collections.abc.Mapping) and all(
        isinstance(k, str) and isinstance(v, _C.Tensor) for k, v in obj.items())


_SCALARS = (bool, int, float, str, type(None))


def _flatten(obj):
    """(tensors, tree) for a nested object: tensors maps a unique name (the
    path of keys and indices joined by '.') to each tensor, in the order
    met; tree is the object as JSON-ready data, each tensor replaced by
    {"t": name}, dicts by {"d": [[key, value], ...]} (keys may be str, int,
    float, bool or None), lists by {"l": [...]}, tuples by {"u": [...]},
    scalars by {"v": value}."""
    tensors = {}

    def name_for(path):
        base = ".".join(str(p) for p in path) or "tensor"
        name, n = base, 1
        while name in tensors or name == "__metadata__":
            n += 1
            name = f"{base}#{n}"
        return name

    def where(path):
        return "the object" + "".join(f"[{p!r}]" for p in path)

    def walk(v, path):
        if isinstance(v, _C.Tensor):
            name = name_for(path)
            _check_tensor(name, v)
            tensors[name] = v
            return {"t": name}
        if isinstance(v, _SCALARS):
            return {"v": v}
        if isinstance(v, collections.abc.Mapping):
            items = []
            for k, x in v.items():
                if not isinstance(k, _SCALARS):
                    raise TypeError(f"save: a key of {where(path)} is of type {type(k).__name__} ({k!r}); keys "
                                    "must be str, int, float, bool or None")
                items.append([k, walk(x, path + [k])])
            return {"d": items}
        if isinstance(v, (list, tuple)):
            return {"u" if isinstance(v, tuple) else "l": [walk(x, path + [i]) for i, x in enumerate(v)]}
        raise TypeError(f"save: {where(path)} is of type {type(v).__name__}, which tensord.save cannot "
                        "store (it stores tensors, numbers, strings, bools, None, and dicts, lists and "
                        "tuples of them)")

    return tensors, walk(obj, [])


def _unflatten(tree, tensors):
    """The object that _flatten's tree describes, with the loaded tensors."""
    if not isinstance(tree, dict) or len(tree) != 1:
        raise RuntimeError(f"load: the {TREE_KEY!r} metadata is malformed (at {str(tree)[:60]!r})")
    (kind, v), = tree.items()
    if kind == "t":
        if v not in tensors:
            raise RuntimeError(f"load: the {TREE_KEY!r} metadata names a tensor {v!r} that the file lacks")
        return tensors[v]
    if kind == "v":
        return v
    if kind == "d":
        if not isinstance(v, list) or not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], _SCALARS)
                                              for p in v):
            raise RuntimeError(f"load: the {TREE_KEY!r} metadata has a malformed dict entry (at {str(v)[:60]!r})")
        return {k: _unflatten(x, tensors) for k, x in v}
    if kind in ("l", "u"):
        if not isinstance(v, list):
            raise RuntimeError(f"load: the {TREE_KEY!r} metadata has a malformed list entry (at {str(v)[:60]!r})")
        items = [_unflatten(x, tensors) for x in v]
        return tuple(items) if kind == "u" else items
    raise RuntimeError(f"load: the {TREE_KEY!r} metadata has an unknown entry kind {kind!r}")


# Set by `tensord check` (every tensor is on meta there): save() then writes
# meta tensors as zeros, as a sparse hole in the file, so a script that saves
# a checkpoint and loads it back runs; load() under check reads only headers.
_zeros_for_meta = False


def save(obj, f, metadata=None):
    """Writes tensors to ``f`` in the safetensors format.

    Args:
        obj: a mapping str -> tensord.Tensor (a ``state_dict()``, for
            instance), stored as its tensors under its keys; or any nesting
            of dicts (keys str, int, float, bool or None), lists and tuples
            of tensors, numbers, strings, bools and None (an optimizer's
            ``state_dict()``, a whole checkpoint), stored as its tensors,
            each named by its path of keys joined with '.'
            (``"state.0.exp_avg"``; ``#2``, ``#3`` appended where two paths
            give one name), and its structure as JSON under ``TREE_KEY`` in
            ``"__metadata__"``, so that ``load`` gives the same structure
            back (tuples as tuples; an OrderedDict as a dict). A tensor that
            appears twice is stored twice. Tensors may be any layout and any
            device with data; each is written as its own contiguous copy
            (views of one storage are stored separately, as safetensors
            requires).
        f: a path (str or os.PathLike) or a binary file object with ``write``.
        metadata: optional mapping str -> str, stored as ``"__metadata__"``
            (``TREE_KEY`` is reserved).

    The header lists the tensors in ``obj``'s order; the data region holds
    them sorted by element size (largest first, then in ``obj``'s order) so
    that every tensor starts at an offset aligned to its element size. The
    header is padded with spaces to a multiple of 8 bytes.

    Raises TypeError for a value or key of another type (naming where it
    is) or a dtype with no safetensors name, ValueError for the key
    ``__metadata__`` in a flat dict, non-string metadata or metadata that
    uses ``TREE_KEY``, RuntimeError for meta tensors (no data) and the
    error of any op that produced a tensor. Reading the tensors is a sync
    point.
    """
    if metadata is not None:
        if not isinstance(metadata, collections.abc.Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("save: metadata must be a dict mapping str to str")
        if TREE_KEY in metadata:
            raise ValueError(f"save: the metadata key {TREE_KEY!r} is reserved for the structure of a "
                             "nested object")
    if _is_flat(obj):
        if "__metadata__" in obj:
            raise ValueError("save: the key '__metadata__' is reserved by the safetensors format; pass "
                             "metadata=... instead")
        for k, v in obj.items():
            _check_tensor(k, v)
    else:
        obj, tree = _flatten(obj)
        metadata = dict(metadata or {})
        metadata[TREE_KEY] = json.dumps(tree, separators=(",", ":"), ensure_ascii=False)
    names = list(obj.keys())
    order = sorted(range(len(names)), key=lambda i: (-obj[names[i]].dtype.itemsize, i))
    blobs = {}
    offsets = {}
    pos = 0
    for i in order:
        name = names[i]
        t = obj[name]
        expect = t.numel() * t.dtype.itemsize
        if t.is_meta and _zeros_for_meta:
            blobs[name] = expect          # zeros, written sparsely (see _zeros_for_meta)
            offsets[name] = (pos, pos + expect)
            pos += expect
            continue
        data = _encode_bytes(t)
        if len(data) != expect:  # pragma: no cover - a client bug, not a user error
            raise RuntimeError(f"save: {name!r}: got {len(data)} bytes, expected {expect}")
        blobs[name] = data
        offsets[name] = (pos, pos + len(data))
        pos += len(data)
    header = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    for name in names:
        t = obj[name]
        header[name] = {"dtype": SAFETENSORS_DTYPES[t.dtype._name], "shape": list(t.shape),
                        "data_offsets": list(offsets[name])}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % 8)

    def write(out):
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for i in order:
            blob = blobs[names[i]]
            if isinstance(blob, int):     # a meta tensor's zeros: a hole in the file where possible
                if hasattr(out, "seek") and hasattr(out, "truncate"):
                    out.seek(blob, os.SEEK_CUR)
                    out.truncate(out.tell())
                else:
                    out.write(bytes(blob))
            else:
                out.write(blob)

    if hasattr(f, "write"):
        write(f)
    else:
        with open(os.fspath(f), "wb") as out:
            write(out)


def _read_exact(fh, n, what):
    data = fh.read(n)
    if len(data) != n:
        raise RuntimeError(f"load: the file ended after {len(data)} of the {n} bytes of {what}")
    return data


def _parse_header(fh):
    """(entries, metadata, header_end): entries is a list of (name, dtype name, shape, begin, end)."""
    n = struct.unpack("<Q", _read_exact(fh, 8, "the header length"))[0]
    if n > _HEADER_LIMIT:
        raise RuntimeError(f"load: header length {n} exceeds the limit of {_HEADER_LIMIT} bytes "
                           "(not a safetensors file?)")
    raw = _read_exact(fh, n, "the header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RuntimeError(f"load: the header is not valid UTF-8 ({e})") from None
    if not text.startswith("{"):
        raise RuntimeError("load: the header does not start with '{' (not a safetensors file?)")

    def no_duplicates(pairs):
        seen = {}
        for k, v in pairs:
            if k in seen:
                raise RuntimeError(f"load: the header names {k!r} twice")
            seen[k] = v
        return seen

    try:
        header = json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise RuntimeError(f"load: the header is not valid JSON ({e})") from None
    except RecursionError:
        raise RuntimeError("load: the header nests JSON values too deeply") from None
    if not isinstance(header, dict):
        raise RuntimeError("load: the header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise RuntimeError("load: __metadata__ must map strings to strings")
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise RuntimeError(f"load: tensor {name!r}: expected exactly the keys dtype, shape and "
                               f"data_offsets, got {info!r}")
        st = info["dtype"]
        if not isinstance(st, str):
            raise RuntimeError(f"load: tensor {name!r}: dtype must be a string, got {st!r}")
        if st not in _FROM_SAFETENSORS:
            if st in _UNSUPPORTED:
                raise TypeError(f"load: tensor {name!r} has safetensors dtype {st}, which tensord does not support")
            raise RuntimeError(f"load: tensor {name!r} has an unknown dtype {st!r}")
        shape = info["shape"]
        offs = info["data_offsets"]
        if (not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**63
                                                   for s in shape)):
            raise RuntimeError(f"load: tensor {name!r}: shape must be a list of non-negative ints below 2**63 "
                               f"(int64), got {str(shape)[:200]}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offs)
                or offs[1] < offs[0]):
            raise RuntimeError(f"load: tensor {name!r}: data_offsets must be [begin, end] with "
                               f"0 <= begin <= end, got {offs!r}")
        dt = _FROM_SAFETENSORS[st]
        numel = 1
        for s in shape:
            numel *= s
        expect = numel * BY_NAME[dt].itemsize
        if offs[1] - offs[0] != expect:
            raise RuntimeError(f"load: tensor {name!r} of shape {shape} and dtype {st} needs {expect} bytes, "
                               f"but its data_offsets {offs} span {offs[1] - offs[0]}")
        entries.append((name, dt, shape, offs[0], offs[1]))
    # The tensors must tile the data region from 0 without gaps or overlaps.
    pos = 0
    for name, _, _, begin, end in sorted(entries, key=lambda e: (e[3], e[4])):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else f"leaves a gap of {begin - pos} bytes"
            raise RuntimeError(f"load: tensor {name!r} at data_offsets [{begin}, {end}] {what}")
        pos = end
    return entries, metadata, 8 + n, pos


def _open(f):
    if hasattr(f, "read"):
        return f, False
    return open(os.fspath(f), "rb"), True


def load_metadata(f):
    """The ``"__metadata__"`` dict of a safetensors file (None when it has
    none), without the ``TREE_KEY`` entry of a nested object saved by
    ``save`` (None when that was all); reads only the header."""
    fh, own = _open(f)
    try:
        metadata = _parse_header(fh)[1]
        if metadata is not None and TREE_KEY in metadata:
            metadata = {k: v for k, v in metadata.items() if k != TREE_KEY} or None
        return metadata
    finally:
        if own:
            fh.close()


def _target_device(map_location):
    if map_location is None:
        return "cpu"
    if isinstance(map_location, (_device_cls, str)):
        return str(_device_cls(map_location) if isinstance(map_location, str) else map_location)
    raise TypeError(f"load: map_location must be None, a str or a tensord.device, got "
                    f"{type(map_location).__name__} (functions and dicts are not supported)")


def load(f, map_location=None):
    """Reads a safetensors file written by ``tensord.save`` or any safetensors writer.

    Args:
        f: a path (str or os.PathLike) or a binary file object with ``read``
            (and ``seek`` unless ``map_location='meta'``).
        map_location: None or 'cpu' (tensors in the current session's daemon
            on cpu), another device string or ``tensord.device`` such as
            'cuda:0', or 'meta': meta tensors with the stored shapes and
            dtypes, made from the header alone — the data region is never
            read (it need not even be present).

    Returns a dict name -> Tensor in the header's order (contiguous
    tensors); for a file of a nested object saved by ``save`` (its
    metadata has ``TREE_KEY``), that object, rebuilt.

    Raises RuntimeError for a malformed file: a truncated header or data
    region, invalid JSON, a header entry whose byte span does not match its
    shape and dtype, or tensors that do not tile the data region exactly;
    TypeError for a safetensors dtype tensord lacks (U16, U32, U64);
    RuntimeError when map_location names a device the daemon does not have,
    or when the ``TREE_KEY`` metadata is not valid.
    """
    dev = _target_device(map_location)
    if dev != "meta":
        from ._session import connect, default_session
        have = (default_session() or connect()).devices
        if dev not in have:
            raise RuntimeError(f"load: map_location {dev!r} is not a device of the daemon (it has "
                               f"{', '.join(have)})")
    fh, own = _open(f)
    try:
        entries, metadata, start, data_len = _parse_header(fh)
        out = _load_tensors(fh, entries, start, data_len, dev)
    finally:
        if own:
            fh.close()
    if metadata is None or TREE_KEY not in metadata:
        return out
    try:
        tree = json.loads(metadata[TREE_KEY])
    except ValueError as e:
        raise RuntimeError(f"load: the {TREE_KEY!r} metadata is not valid JSON ({e})") from None
    except RecursionError:
        raise RuntimeError(f"load: the {TREE_KEY!r} metadata nests too deeply") from None
    try:
        return _unflatten(tree, out)
    except RecursionError:
        raise RuntimeError(f"load: the {TREE_KEY!r} metadata nests too deeply") from None


def _load_tensors(fh, entries, start, data_len, dev):
    """The file's tensors on `dev` (meta: from the header alone), by name."""
    out = {}
    if dev == "meta":
        for name, dt, shape, _, _ in entries:
            out[name] = _C.call("empty", shape, dtype=BY_NAME[dt], device="meta")
        return out
    fh.seek(0, io.SEEK_END)
    size = fh.tell()
    if size - start != data_len:
        raise RuntimeError(f"load: the header describes a data region of {data_len} bytes, but the file "
                           f"has {size - start} bytes after the header")
    for name, dt, shape, begin, end in entries:
        fh.seek(start + begin)
        data = _read_exact(fh, end - begin, f"tensor {name!r}")
        buf = np.frombuffer(data, dtype=np.uint8)
        if sys.byteorder != "little" and BY_NAME[dt].itemsize > 1:  # pragma: no cover - big-endian hosts
            buf = np.frombuffer(data, dtype=np.dtype(f"<u{BY_NAME[dt].itemsize}")).byteswap().view(np.uint8)
        out[name] = _C.from_buffer(buf, list(shape), BY_NAME[dt]._code, dev)
    return out
