"""PyTorch-style ``repr`` of tensors (the layout of torch/_tensor_str.py).

Printing is a display concern: the values are fetched once (one sync point)
as a NumPy array and laid out here, with PyTorch's print options: precision 4,
line width 80, summarisation with 3 edge items above 1,000 elements.
"""
import math

import numpy as np

__all__ = ["tensor_repr"]

PRECISION = 4
LINEWIDTH = 80
EDGEITEMS = 3
THRESHOLD = 1000
_DEFAULT_DTYPES = ("float32", "int64", "bool")


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        with np.errstate(invalid="ignore"):
            vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if vals.size == 0:
            return
        absv = np.abs(vals)
        vmin, vmax = float(absv.min()), float(absv.max())
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        if self.int_mode:
            if vmax / vmin > 1000.0 or vmax > 1.0e8:
                self.sci_mode = True
                for v in vals.tolist():
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}e}"))
            else:
                for v in vals.tolist():
                    self.max_width = max(self.max_width, len(f"{v:.0f}") + 1)
        else:
            if vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4:
                self.sci_mode = True
                for v in vals.tolist():
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}e}"))
            else:
                for v in vals.tolist():
                    self.max_width = max(self.max_width, len(f"{v:.{PRECISION}f}"))

    def width(self):
        return self.max_width

    def format(self, value):
        if self.floating:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRECISION}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRECISION}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summarized(a):
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * EDGEITEMS:
        parts = [a[:EDGEITEMS], a[-EDGEITEMS:]]
    else:
        parts = [a]
    return np.concatenate([np.stack([_summarized(x) for x in p]) if a.ndim > 1 else p for p in parts])


def _vector_str(a, indent, summarize, fmt):
    element_length = fmt.width() + 2
    per_line = max(1, int(math.floor((LINEWIDTH - indent) / element_length)))
    if summarize and a.shape[0] > 2 * EDGEITEMS:
        data = ([fmt.format(v) for v in a[:EDGEITEMS].tolist()] + [" ..."] +
                [fmt.format(v) for v in a[-EDGEITEMS:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    n = a.shape[0]
    if summarize and n > 2 * EDGEITEMS:
        slices = ([_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(EDGEITEMS)] + ["..."] +
                  [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n - EDGEITEMS, n)])
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last_line_len + len(s) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * indent + s)
            last_line_len = indent + len(s)
        else:
            parts.append(", " + s)
            last_line_len += len(s) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t):
    """``tensor([[1., 2.],\\n        [3., 4.]])`` — PyTorch's layout; dtype shown when
    not float32/int64/bool, device when not cpu; meta tensors print
    ``tensor(..., device='meta', size=(3, 4))`` without touching data."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    dev = t._device_str
    dtype = t.dtype
    if dev != "cpu":
        suffixes.append(f"device='{dev}'")
    if t.is_meta:
        suffixes.append("size=" + str(tuple(t.shape)))
        if dtype._name != "float32":
            suffixes.append("dtype=" + repr(dtype))
        body = "..."
    elif t.numel() == 0:
        if t.dim() != 1:
            suffixes.append("size=" + str(tuple(t.shape)))
        if dtype._name != "float32":
            suffixes.append("dtype=" + repr(dtype))
        body = "[]"
    else:
        if dtype._name not in _DEFAULT_DTYPES:
            suffixes.append("dtype=" + repr(dtype))
        values = t._host_array()
        summarize = values.size > THRESHOLD
        fmt = _Formatter(_summarized(values) if summarize else values, dtype.is_floating_point)
        body = _tensor_str(values, indent, summarize, fmt)
    return _add_suffixes(prefix + body, suffixes, indent)
