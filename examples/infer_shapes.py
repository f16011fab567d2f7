#!/usr/bin/python3
"""Shape inference without data and without a daemon (meta mode).

The TensorPlay meta-device page's idiom: project a sequence to queries, keys
and values, split heads, and read the shapes — on meta tensors, which carry
only sizes, strides and dtypes. Nothing is spawned and nothing touches the
network; the script checks that no session was ever created.

    /usr/bin/python3 examples/infer_shapes.py
    # (tensord.Size([8, 128, 64]), tensord.Size([8, 128, 64]))
"""
import _path  # noqa: F401  (in-tree fallback)

import tensord


def infer_shapes(seq_len, d_model, n_heads):
    """Shapes of the per-head queries and keys of one attention layer."""
    with tensord.device("meta"):
        x = tensord.randn(seq_len, d_model)
        qkv = x @ tensord.randn(d_model, 3 * d_model)
        head_dim = d_model // n_heads
        q = qkv[:, :d_model].reshape(seq_len, n_heads, head_dim)
        k = qkv[:, d_model:2 * d_model].reshape(seq_len, n_heads, head_dim)
        return q.transpose(0, 1).shape, k.transpose(0, 1).shape


def main():
    shapes = infer_shapes(128, 512, 8)
    print(shapes)
    assert shapes == ((8, 128, 64), (8, 128, 64)), shapes

    # Errors are found without data too: a wrong projection width.
    with tensord.device("meta"):
        x = tensord.randn(128, 512)
        try:
            x @ tensord.randn(500, 64)
        except RuntimeError as e:
            print("caught at the call site:", e)
        q = x.reshape(128, 8, 64).transpose(0, 1)
        print("q:", q.shape, "strides", q.stride(), "contiguous", q.is_contiguous())
    assert tensord.default_session() is None, "meta mode must not start a daemon"
    print("meta ops run:", tensord.stats()["meta_ops"], "- no daemon was started")


if __name__ == "__main__":
    main()
