"""Kernels from C++ and CUDA source, built into artifacts and loaded, with
``torch.utils.cpp_extension``'s and ``cpp_jit``'s vocabulary.

``build`` and ``build_inline`` compile sources into a kernel artifact (one
``.tdk`` file: the ops' schemas and shape rules plus the shared object, see
docs/shipping-a-kernel.md) with ``tensord build-kernel``, which uses the
system's g++ and, for CUDA sources, nvcc. ``load`` and ``load_inline`` build
and then ``tensord.library.load`` the result; ``load_module`` loads an
artifact built earlier, possibly on another machine::

    lib = tensord.cpp_extension.load_inline("mylib", cpp_sources=r'''
        TD_EXPORT int32_t mylib_twice_cpu(TdKernelEnv* env) { ... }
        static const TdOpDecl kOps[] = {{"mylib::twice(Tensor x) -> Tensor", "like:clone", NULL,
                                         "mylib_twice_cpu", NULL}};
        TD_DEFINE_LIBRARY("mylib", kOps)
    ''')
    lib.twice(x)

Inline sources get ``#include <tensord_kernel.h>`` (and ``<cstdint>``,
``<cmath>``) prepended; files passed to ``build`` and ``load`` carry their
own includes. Builds are cached by the SHA-256 of the sources, the headers
they include, the flags and the compilers' versions, in ``build_directory``
or ``$TENSORD_EXTENSIONS_DIR`` or ``~/.cache/tensord/kernels``: the same
sources and flags again reuse the artifact without compiling.
``build_on="daemon"`` has the daemon build with its own toolchain instead
(a laptop without nvcc, or of another OS); the daemon allows it only under
``--artifacts any``.
"""
import hashlib
import os
import shutil
import subprocess

from . import _C
from . import library as _library

__all__ = ["build", "build_inline", "load", "load_inline", "load_module", "is_available", "default_build_directory"]


def is_available(cuda=False):
    """Whether this machine can build artifacts: a g++ on PATH and the
    tensord binary (and with ``cuda=True``, nvcc in /usr/local/cuda/bin or on
    PATH). Never raises."""
    try:
        _C.tensord_binary()
    except RuntimeError:
        return False
    if shutil.which("g++") is None:
        return False
    return not cuda or os.access("/usr/local/cuda/bin/nvcc", os.X_OK) or shutil.which("nvcc") is not None


def default_build_directory():
    """``$TENSORD_EXTENSIONS_DIR``, else ``~/.cache/tensord/kernels``."""
    d = os.environ.get("TENSORD_EXTENSIONS_DIR")
    return d if d else os.path.join(os.path.expanduser("~"), ".cache", "tensord", "kernels")


def _check_name(name):
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"cpp_extension: name must be an identifier (the library's namespace), got {name!r}")


def _as_list(v, what):
    if v is None:
        return []
    if isinstance(v, str):
        return [v]
    v = list(v)
    if not all(isinstance(s, str) for s in v):
        raise TypeError(f"cpp_extension: {what} must be a str or a list of str")
    return v


def build(name, sources, *, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
          extra_include_paths=None, cuda_archs=None, build_directory=None, verbose=False, build_on="client"):
    """Compiles ``sources`` (paths of .c/.cc/.cpp files and .cu files) into
    the artifact of library ``name`` (the namespace of its ops) and returns
    its path, ``<build_directory>/<name>.tdk``. ``cuda_archs``: compute
    capabilities as ints or strings (``[80, 90]``: sm_80 and sm_90 machine
    code, plus PTX of the last; default 80 and 90). The flags lists go to
    g++, nvcc and the link.

    ``build_on="daemon"`` builds with the daemon's toolchain instead (the
    default session's daemon: a laptop without nvcc, or of another OS, can
    build for the server): the sources (and the headers beside them, by
    base name) are sent, the daemon builds in a scratch directory and keeps
    the artifact, and its bytes come back to ``<build_directory>/<name>.tdk``.
    The daemon allows this only under ``--artifacts any`` (it runs your code
    as an uploaded artifact does); ``extra_include_paths`` cannot be used.

    Raises ValueError for a name that is not an identifier, FileNotFoundError
    for a missing source, RuntimeError when tensord or a compiler is missing,
    the compiler fails (its message included), or an op's declaration is
    refused (a schema that does not parse, a shape rule naming a missing
    argument, an op outside library ``name``, a symbol not exported).
    """
    _check_name(name)
    sources = [os.fspath(s) for s in _as_list(sources, "sources")]
    if not sources:
        raise ValueError("cpp_extension.build: no sources")
    for s in sources:
        if not os.path.isfile(s):
            raise FileNotFoundError(f"cpp_extension.build: no source file {s!r}")
    directory = os.fspath(build_directory) if build_directory is not None else default_build_directory()
    os.makedirs(directory, exist_ok=True)
    out = os.path.join(directory, name + ".tdk")
    if build_on == "daemon":
        if extra_include_paths:
            raise ValueError("cpp_extension.build: extra_include_paths cannot be sent to the daemon; pass the headers "
                             "as sources")
        files = []
        for s in sources:
            with open(s, "rb") as f:
                files.append((os.path.basename(s), f.read().decode("utf-8", "surrogateescape")))
        return _build_on_daemon(name, files, out, cuda_archs, extra_cflags, extra_cuda_cflags, extra_ldflags)
    if build_on != "client":
        raise ValueError(f"cpp_extension.build: build_on must be 'client' or 'daemon', got {build_on!r}")
    cmd = [_C.tensord_binary(), "build-kernel", "-o", out, "--name", name, "--cache", os.path.join(directory, "cache")]
    if cuda_archs is not None:
        cmd += ["--cuda-arch", ",".join(str(int(a)) for a in cuda_archs)]
    for flag, values in (("--cflags", extra_cflags), ("--cuda-cflags", extra_cuda_cflags),
                         ("--ldflags", extra_ldflags)):
        values = _as_list(values, flag[2:])
        if values:
            cmd += [flag, " ".join(values)]
    for inc in _as_list(extra_include_paths, "extra_include_paths"):
        cmd += ["-I", inc]
    if verbose:
        cmd.append("-v")
    cmd += sources
    r = subprocess.run(cmd, capture_output=not verbose, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"cpp_extension.build({name}): tensord build-kernel failed:\n{(r.stderr or '').strip()}")
    return out


def _build_on_daemon(name, files, out, cuda_archs, cflags, cuda_cflags, ldflags):
    """Sends (base name, text) `files` to the default session's daemon to
    build; writes the artifact it returns to `out` (atomically) and returns `out`."""
    from ._session import default_session

    raw = default_session()._raw
    data = raw.build_artifact(name, files, [str(int(a)) for a in (cuda_archs or [])], _as_list(cflags, "extra_cflags"),
                              _as_list(cuda_cflags, "extra_cuda_cflags"), _as_list(ldflags, "extra_ldflags"))
    tmp = out + f".{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    return out


_PREAMBLE = "#include <tensord_kernel.h>\n#include <cstdint>\n#include <cmath>\n"


def build_inline(name, cpp_sources, cuda_sources=None, *, build_directory=None, **kwargs):
    """``build`` for sources given as strings (one str or a list of them per
    language): each list is written to a file in a directory named by the
    sources' hash, with the ABI header's include prepended, and built (on
    the daemon with ``build_on="daemon"``, as ``build``). Returns the
    artifact's path. Raises what ``build`` raises."""
    _check_name(name)
    cpp = _as_list(cpp_sources, "cpp_sources")
    cu = _as_list(cuda_sources, "cuda_sources")
    if not cpp and not cu:
        raise ValueError("cpp_extension.build_inline: no sources")
    directory = os.fspath(build_directory) if build_directory is not None else default_build_directory()
    h = hashlib.sha256(repr((name, cpp, cu)).encode()).hexdigest()[:16]
    src_dir = os.path.join(directory, "inline", f"{name}-{h}")
    os.makedirs(src_dir, exist_ok=True)
    files = []
    for text, ext in (("\n".join(cpp), ".cc"), ("\n".join(cu), ".cu")):
        if not text:
            continue
        path = os.path.join(src_dir, name + ext)
        body = _PREAMBLE + text
        if not os.path.exists(path) or open(path).read() != body:
            with open(path, "w") as f:
                f.write(body)
        files.append(path)
    return build(name, files, build_directory=directory, **kwargs)


def load_module(path):
    """Loads an artifact file built earlier: ``tensord.library.load(path)``."""
    return _library.load(path)


def load(name, sources, **kwargs):
    """``build`` then ``load_module``: returns the ``tensord.library.Library``."""
    return load_module(build(name, sources, **kwargs))


def load_inline(name, cpp_sources, cuda_sources=None, **kwargs):
    """``build_inline`` then ``load_module``: returns the
    ``tensord.library.Library``, whose ops are attributes
    (``lib.fused_bias_gelu``)."""
    return load_module(build_inline(name, cpp_sources, cuda_sources, **kwargs))
