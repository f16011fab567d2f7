"""OpInfo entries of nn ops (convolution, pooling, normalisation, losses); see opinfo.py for how to add one.

The references are PyTorch 1.13's own ops (torch.conv2d, torch.ops.aten.*):
NumPy has no convolution or pooling. Backward ops are checked against aten's
backward ops on the same arguments.
"""
import numpy as np

from opinfo_base import *  # noqa: F401,F403
from opinfo_base import torch  # None without PyTorch (the GPU pack)

# Pooling samples hold distinct random values (no ties, no NaN): gradcheck runs
# on them. Ties and NaN are checked against torch in test_nn_ops.py.



def _conv_samples(r):
    return [
        Sample(f32(r, 2, 3, 6, 7), f32(r, 4, 3, 3, 3)),
        Sample(f32(r, 2, 3, 6, 7), f32(r, 4, 3, 3, 3), f32(r, 4), 2, 1),
        Sample(f32(r, 1, 4, 7, 7), f32(r, 6, 2, 3, 3), f32(r, 6), 1, 2, 2, 2),        # groups, dilation
        Sample(f32(r, 3, 5, 5), f32(r, 2, 3, 2, 2)),                                  # unbatched
        Sample(f64(r, 2, 2, 5, 6), f64(r, 3, 2, 2, 3), f64(r, 3), [1, 2], [2, 1]),   # float64, pairs
        Sample(f32(r, 0, 3, 5, 5), f32(r, 4, 3, 3, 3)),                               # empty batch
        Sample(f32(r, 2, 3, 4, 4), f32(r, 5, 3, 1, 1), f32(r, 5)),                    # 1x1
        Sample(f32(r, 1, 2, 1, 1), f32(r, 2, 2, 1, 1)),                               # size-1 spatial
        Sample(f32(r, 2, 4, 5, 5), f32(r, 4, 1, 3, 3), None, 1, 1, 1, 4),             # depthwise
    ]


def _conv_errors(r):
    x = f32(r, 2, 3, 6, 7)
    w = f32(r, 4, 3, 3, 3)
    return [
        ErrorInput(Sample(x, f32(r, 4, 2, 3, 3)), RuntimeError, "to have 2 channels, but got 3 channels instead"),
        ErrorInput(Sample(x, w, None, 1, 0, 1, 2), RuntimeError, "to have 6 channels, but got 3 channels instead"),
        ErrorInput(Sample(x, w, f32(r, 3)), RuntimeError, "expected bias to be 1-dimensional with 4 elements"),
        ErrorInput(Sample(f32(r, 2, 3, 2, 2), w), RuntimeError, "Kernel size can't be greater than actual input size"),
        ErrorInput(Sample(x, w, None, 0), RuntimeError, "non-positive stride is not supported"),
        ErrorInput(Sample(x, w, None, 1, -1), RuntimeError, "negative padding is not supported"),
        ErrorInput(Sample(x, w, None, 1, 0, 0), RuntimeError, "non-positive dilation is not supported"),
        ErrorInput(Sample(x, w, None, [1, 1, 1]), RuntimeError,
                   "expected stride to be a single integer value or a list of 2"),
        ErrorInput(Sample(f32(r, 3, 6), w), RuntimeError, "Expected 3D (unbatched) or 4D (batched) input to conv2d"),
        ErrorInput(Sample(x, w, None, 1, 0, 1, 0), RuntimeError, "non-positive groups is not supported"),
        ErrorInput(Sample(x.astype(np.float64), w), RuntimeError, "expected scalar type Double but found Float"),
        ErrorInput(Sample(i64(r, 2, 3, 6, 7), i64(r, 4, 3, 3, 3)), RuntimeError, "not implemented for 'Long'"),
    ]


def _conv_backward_torch(grad, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                         groups):
    return torch.ops.aten.convolution_backward(grad, input, weight, bias_sizes, stride, padding, dilation, transposed,
                                      output_padding, groups, [True, True, True])


def _conv_backward_samples(r):
    return [
        Sample(f32(r, 2, 4, 4, 5), f32(r, 2, 3, 6, 7), f32(r, 4, 3, 3, 3), [4], [1, 1], [0, 0], [1, 1], False,
               [0, 0], 1),
        Sample(f64(r, 1, 6, 4, 4), f64(r, 1, 4, 7, 7), f64(r, 6, 2, 3, 3), None, [2, 2], [2, 2], [2, 2], False,
               [0, 0], 2),
        Sample(f32(r, 2, 5, 4, 4), f32(r, 2, 3, 4, 4), f32(r, 5, 3, 1, 1), [5], [1, 1], [0, 0], [1, 1], False,
               [0, 0], 1),
    ]


def _conv_backward_errors(r):
    g, x, w = f32(r, 2, 4, 4, 5), f32(r, 2, 3, 6, 7), f32(r, 4, 3, 3, 3)
    return [
        ErrorInput(Sample(g, x, w, [4], [1, 1], [0, 0], [1, 1], True, [0, 0], 1), NotImplementedError,
                   "transposed convolution is not supported"),
        ErrorInput(Sample(f32(r, 2, 4, 4, 4), x, w, [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1), RuntimeError,
                   "expected grad_output of size [2, 4, 4, 5]"),
    ]


def _max_pool_samples(r):
    return [
        Sample(f32(r, 2, 3, 6, 7), [2, 2]),
        Sample(f32(r, 2, 3, 6, 7), [3, 3], [2, 2], [1, 1], [1, 1], True),              # ceil_mode
        Sample(f32(r, 3, 5, 5), 2, 1),                                                  # unbatched, stride 1
        Sample(f64(r, 1, 2, 7, 8), [3, 2], [2, 1], [1, 0], [2, 1]),                     # dilation
        Sample(f32(r, 0, 3, 6, 7), 2),                                                  # empty batch
        Sample(f32(r, 1, 1, 5, 5), 2, 2, 1, 1, True),
    ]


def _pool_errors(op):
    def errors(r):
        x = f32(r, 2, 3, 6, 7)
        out = [
            ErrorInput(Sample(x, 3, 1, 2), RuntimeError,
                       "pad should be at most half of kernel size, but got pad=2 and kernel_size=3"),
            ErrorInput(Sample(f32(r, 3, 2, 2), 4, 1), RuntimeError,
                       "Given input size: (3x2x2). Calculated output size: (3x-1x-1). Output size is too small"),
            ErrorInput(Sample(x, 2, 0), RuntimeError, "stride should not be zero"),
            ErrorInput(Sample(x, 3, 1, -1), RuntimeError, "pad must be non-negative, but got pad: -1"),
            ErrorInput(Sample(f32(r, 2, 0, 6, 7), 2), RuntimeError,
                       "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input"),
            ErrorInput(Sample(x, [2, 2, 2]), RuntimeError,
                       "kernel_size must either be a single int, or a tuple of two ints"),
            ErrorInput(Sample(i64(r, 2, 3, 6, 7), 2), RuntimeError, "not implemented for 'Long'"),
        ]
        if op == "max":
            out += [ErrorInput(Sample(x, 2, 2, 0, 0), RuntimeError, "dilation should be greater than zero"),
                    ErrorInput(Sample(f32(r, 6, 7), 2), RuntimeError,
                               "non-empty 3D or 4D (batch mode) tensor expected")]
        else:
            out += [ErrorInput(Sample(x, 2, 2, 0, False, True, 0), RuntimeError, "divisor must be not zero"),
                    ErrorInput(Sample(f32(r, 6, 7), 2), IndexError, "Dimension out of range")]
        return out
    return errors


def _max_pool_torch(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return torch.ops.aten.max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode)


def _avg_pool_torch(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
    return torch.ops.aten.avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _avg_pool_samples(r):
    return [
        Sample(f32(r, 2, 3, 6, 7), [2, 2]),
        Sample(f32(r, 2, 3, 6, 7), [3, 3], [2, 2], [1, 1], True),
        Sample(f32(r, 2, 3, 6, 7), [3, 3], [2, 2], [1, 1], True, False),               # count_include_pad=False
        Sample(f64(r, 3, 5, 5), 2, 1, 1, False, True, 3),                               # unbatched, divisor
        Sample(f32(r, 0, 3, 6, 7), 2),
        Sample(f64(r, 1, 2, 7, 8), [3, 2], [2, 1], [1, 0]),
        Sample(f32(r, 1, 1, 5, 5), 2, 2, 1, True, False),
    ]


def _pool_out_size(size, kernel, stride, padding, dilation, ceil_mode):
    """PyTorch's pooling output length along one dimension."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:   # the last window must start inside
        out -= 1
    return out


def _max_pool_indices(x, kernel, stride, padding, dilation, ceil_mode):
    """max_pool2d_with_indices' indices (flat in each H x W plane) of x
    [..., H, W], in NumPy: what the backward samples need, made where
    PyTorch may be absent (the device suites on a GPU machine). Windows skip
    the padding; the first maximum wins (the samples have no ties)."""
    h, w = x.shape[-2:]
    oh, ow = (_pool_out_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in
              zip((h, w), kernel, stride, padding, dilation))
    idx = np.empty(x.shape[:-2] + (oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            rows = [a for a in range(i * stride[0] - padding[0], i * stride[0] - padding[0] + kernel[0] * dilation[0],
                                     dilation[0]) if 0 <= a < h]
            cols = [b for b in range(j * stride[1] - padding[1], j * stride[1] - padding[1] + kernel[1] * dilation[1],
                                     dilation[1]) if 0 <= b < w]
            flat = np.array([a * w + b for a in rows for b in cols])
            window = x.reshape(x.shape[:-2] + (h * w,))[..., flat]
            idx[..., i, j] = flat[np.argmax(window, axis=-1)]
    return idx


def _max_pool_backward_samples(r):
    out = []
    for x, args in [(f32(r, 2, 3, 6, 7), ([2, 2], [2, 2], [0, 0], [1, 1], False)),
                    (f64(r, 2, 3, 6, 7), ([3, 3], [2, 2], [1, 1], [1, 1], True)),
                    (f32(r, 3, 5, 5), ([2, 2], [1, 1], [0, 0], [1, 1], False)),     # overlapping windows
                    (f64(r, 1, 2, 7, 8), ([3, 2], [2, 1], [1, 0], [2, 1], False))]:
        idx = _max_pool_indices(x, *args)
        g = r.standard_normal(idx.shape).astype(x.dtype)
        out.append(Sample(g, x, *args, idx))
    return out


def _max_pool_backward_errors(r):
    x = f32(r, 2, 3, 6, 7)
    return [
        ErrorInput(Sample(f32(r, 2, 3, 2, 2), x, [2, 2], [2, 2], [0, 0], [1, 1], False, i64(r, 2, 3, 3, 3, lo=0, hi=4)),
                   RuntimeError, "expected grad_output of size [2, 3, 3, 3]"),
        ErrorInput(Sample(f32(r, 2, 3, 3, 3), x, [2, 2], [2, 2], [0, 0], [1, 1], False, i32(r, 2, 3, 3, 3)),
                   RuntimeError, "expected indices of dtype int64"),
    ]


def _avg_pool_backward_samples(r):
    out = []
    for x, args in [(f32(r, 2, 3, 6, 7), ([2, 2], [2, 2], [0, 0], False, True, None)),
                    (f64(r, 2, 3, 6, 7), ([3, 3], [2, 2], [1, 1], True, False, None)),
                    (f64(r, 3, 5, 5), ([2, 2], [1, 1], [1, 1], False, True, 3))]:
        kernel, stride, padding, ceil_mode = args[:4]
        shape = x.shape[:-2] + tuple(_pool_out_size(n, k, s, p, 1, ceil_mode) for n, k, s, p in
                                     zip(x.shape[-2:], kernel, stride, padding))
        out.append(Sample(r.standard_normal(shape).astype(x.dtype), x, *args))
    return out


def _avg_pool_backward_errors(r):
    x = f32(r, 2, 3, 6, 7)
    return [ErrorInput(Sample(f32(r, 2, 3, 2, 2), x, [2, 2], [2, 2], [0, 0], False, True, None), RuntimeError,
                       "expected grad_output of size [2, 3, 3, 3]")]


OPINFOS = [
    OpInfo("conv2d", _conv_samples, errors=_conv_errors, rtol=1e-4, atol=1e-5),
    OpInfo("convolution_backward", _conv_backward_samples, torch_ref=_conv_backward_torch, errors=_conv_backward_errors,
           rtol=1e-4, atol=1e-4),
    OpInfo("max_pool2d_with_indices", _max_pool_samples, torch_ref=_max_pool_torch, errors=_pool_errors("max")),
    OpInfo("max_pool2d_with_indices_backward", _max_pool_backward_samples,
           torch_ref=lambda *a: torch.ops.aten.max_pool2d_with_indices_backward(*a), errors=_max_pool_backward_errors),
    OpInfo("avg_pool2d", _avg_pool_samples, torch_ref=_avg_pool_torch, errors=_pool_errors("avg")),
    OpInfo("avg_pool2d_backward", _avg_pool_backward_samples, torch_ref=lambda *a: torch.ops.aten.avg_pool2d_backward(*a),
           errors=_avg_pool_backward_errors),
]
