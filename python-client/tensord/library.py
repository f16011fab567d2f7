"""Ops defined at run time, with PyTorch's ``torch.library`` vocabulary.

``define("mylib::scale", "(Tensor x, Scalar s) -> Tensor", like="mul.Scalar")``
adds an op to this process's op set: it is then ``tensord.ops.mylib.scale``,
callable like any op, with its arguments bound by its schema and its output's
shape, strides and dtype computed by its shape rule at the call site. On meta
tensors it needs no daemon, so ``tensord check`` validates programs that use
it. A daemon session is sent the definitions before the first call that
needs them; the daemon checks them again and the two agree by digest.

The shape rule is ``like=``, the name of a built-in op whose arguments and
returns have the new op's types in the same order (its shape function, and
its errors, which then name the new op, are the new op's), or ``rule=``, a
declarative shape rule (docs/custom-ops.md): a few lines that check the
arguments and give each output's shape, dtype and layout::

    define("mylib::bias_gelu", "(Tensor x, Tensor bias) -> Tensor", rule='''
        check bias.dim() == 1 and bias.size(0) == x.size(-1), "bias must be [{x.size(-1)}], got {bias.shape}"
        return empty(broadcast(x, bias), dtype=promote(x, bias), layout=like(x))
    ''')

An op defined here has no kernel, so on a daemon's tensors it raises
NotImplementedError. ``derivative=`` gives it a derivative written in table
ops (docs/custom-ops.md), one line per differentiable argument::

    define("mylib::scale", "(Tensor x, Scalar s) -> Tensor", like="mul.Scalar", derivative="x: grad * s")

so that autograd records it (``grad_fn``, which inputs get a gradient, the
saved tensors a backward reads), on meta tensors too; an op loaded from a
kernel artifact (``load``) takes the derivative in its manifest, which the
daemon runs. Without one a backward through the op raises NotImplementedError.

``custom_op("mylib::f", mutates_args=())`` makes a Python function an op,
with ``register_fake``, ``register_autograd`` and ``register_kernel``, as
``torch.library.custom_op`` (tensord/_custom_op.py): its body, written in
tensord ops, runs in the client; its derivative is the registered one.
"""
from . import _C
from ._custom_op import CustomOpDef, custom_op, opcheck, register_autograd, register_fake, register_kernel

__all__ = ["define", "load", "Library", "custom_op", "CustomOpDef", "opcheck", "register_fake", "register_autograd",
           "register_kernel"]


def define(qualname, schema, *, like=None, rule=None, derivative=None):
    """Defines op ``qualname`` ("namespace::name", or "namespace::name.overload")
    with ``schema``, its arguments and returns in PyTorch's schema syntax
    ("(Tensor x, Scalar s=1) -> Tensor"), and one shape rule: ``like``, the
    rule of a built-in op ("mul.Scalar"; a base name when it has one
    overload), or ``rule``, the text of a declarative shape rule (see the
    module docstring; at most 16 KiB), and optionally ``derivative``, the
    text of its derivative in table ops (at most 16 KiB). Returns the op, also reachable as
    ``tensord.ops.<namespace>.<name>`` (an overload as
    ``tensord.ops.<namespace>.<name>.<overload>``). Factory-like ops (``like=
    "zeros"``) follow ``tensord.device`` as built-in factories do.

    Raises RuntimeError when the name has no namespace of its own (or uses
    "aten", "tensord" or "prim", or starts with "__", or the overload is
    "default"), is already defined, the schema does not parse, repeats an
    argument name, has alias annotations or non-Tensor returns, is over
    16 KiB (or the process's definitions over 4 MiB), ``like`` names no
    built-in op, a view or in-place op, one whose output shape depends on
    values, or one whose argument or return types differ from ``schema``'s,
    or ``rule`` does not compile (the message names its line and column: a
    syntax error, a name that is not an argument, a wrong number of outputs)
    or the op has no Tensor argument for it, or ``derivative`` does not
    compile (its line and column: a syntax error, an unknown name or op, no
    overload of an op that takes the arguments' types, a line for an
    argument that takes no gradient). TypeError when an argument is not a
    str, ValueError unless exactly one of ``like`` and ``rule`` is given.
    """
    if (like is None) == (rule is None):
        raise ValueError("library.define: give exactly one shape rule: like='<built-in op>' or rule='<text>'")
    for what, v in (("qualname", qualname), ("schema", schema), ("like" if like is not None else "rule",
                                                                  like if like is not None else rule)):
        if not isinstance(v, str):
            raise TypeError(f"library.define: {what} must be a str, got {type(v).__name__}")
    if derivative is not None and not isinstance(derivative, str):
        raise TypeError(f"library.define: derivative must be a str, got {type(derivative).__name__}")
    for what, v in (("qualname", qualname), ("schema", schema), ("rule", rule), ("derivative", derivative)):
        try:
            if v is not None:
                v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"library.define({qualname!r}): {what} is not valid Unicode text "
                             f"(character {e.object[e.start]!r} at {e.start})") from None
    schema = schema.strip()
    if not schema.startswith("("):
        raise RuntimeError(f"library.define: schema must start with its arguments, as in '(Tensor x) -> Tensor', "
                           f"got {schema!r}")
    entry = _C.define_op(qualname + schema, "like:" + like if like is not None else "rule:" + _dedent(rule),
                         _dedent(derivative) if derivative is not None else "")
    import sys
    ops = sys.modules["tensord.ops"]
    ns, _, name = entry["name"].partition("::")
    op = getattr(getattr(ops, ns), name)
    return getattr(op, entry["overload"]) if entry["overload"] else op


class Library:
    """A library of ops loaded from a kernel artifact (``load``): its ops are
    attributes (``lib.fused_bias_gelu``), the same objects as
    ``tensord.ops.<name>.<op>``.

    Attributes: ``name`` (the namespace, "mylib"), ``content_hash`` (the
    artifact's SHA-256 in hex, what a daemon's allow-list names), ``ops``
    (the ops' full names, in the manifest's order), ``path`` (the file it
    was loaded from).
    """

    def __init__(self, info, path):
        import sys
        self.path = path
        self.name = info["name"]
        self.content_hash = info["content_hash"]
        self.ops = []
        ops = sys.modules["tensord.ops"]
        for entry in info["ops"]:
            ns, _, base = entry["name"].partition("::")
            packet = getattr(getattr(ops, ns), base)
            full = entry["name"] + ("." + entry["overload"] if entry["overload"] else "")
            self.ops.append(full)
            if not hasattr(self, base):
                setattr(self, base, packet)

    def __repr__(self):
        return f"<tensord.library.Library {self.name} ({len(self.ops)} ops, sha256 {self.content_hash[:12]})>"


def load(path):
    """Loads the kernel artifact at ``path`` (a ``.tdk`` file that
    ``tensord build-kernel`` or ``tensord.cpp_extension`` wrote) and returns
    its ``Library``. Its ops are defined in this process at once, so they run
    on meta tensors and under ``tensord check`` with no daemon; on a
    daemon's tensors the session first makes sure the daemon holds the
    artifact (by content hash: its bytes travel at most once per daemon),
    and the daemon checks it, under its operator's policy, and loads it.
    Loading the same file again returns the same ops.

    Raises FileNotFoundError when ``path`` does not exist; RuntimeError for
    a file that is not a valid artifact (truncated, altered: the message
    says how), an op that clashes with one defined already in this process,
    and, at the first call on a daemon's tensors, the daemon's refusal (its
    ``--artifacts`` policy, its size limit, code it cannot run).
    """
    import os
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size > _MAX_ARTIFACT_BYTES:
        raise RuntimeError(f"library.load({path}): the file holds {size} bytes, over the artifact limit of "
                           f"{_MAX_ARTIFACT_BYTES}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        info = _C.load_artifact(data)
    except RuntimeError as e:
        raise RuntimeError(f"{path}: {e}") from None
    return Library(info, path)


_MAX_ARTIFACT_BYTES = 1 << 30  # tensord::kMaxArtifactBytes


def _dedent(text):
    """The rule's text without the indentation a triple-quoted string gives it."""
    import textwrap
    return textwrap.dedent(text).strip("\n")
