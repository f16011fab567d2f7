"""Kernel artifacts end to end: a CPU kernel library built with
`tensord build-kernel` from C++ source, loaded with tensord.library.load, run
on meta tensors with no daemon, in a daemon session (uploaded once by content
hash), under `tensord check`, and refused by a daemon whose policy says so."""
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tensord
from conftest import DAEMON_BIN, Daemon, build_kernel, run_tensord_check, subprocess_env

# bias + GELU (erf form) over the last dim of x, float32, any strides of x.
KERNEL = r"""
#include <tensord_kernel.h>
#include <cmath>

static int32_t FusedBiasGelu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  const DLTensor* b = env->args[1].value.tensor;
  DLTensor* y = &env->outputs[0];
  if (x->dtype.code != kDLFloat || x->dtype.bits != 32 || b->dtype.code != kDLFloat || b->dtype.bits != 32)
    return td_fail(env, "expected float32 x and bias");
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  const float* xs = static_cast<const float*>(x->data);
  const float* bs = static_cast<const float*>(b->data);
  float* ys = static_cast<float*>(y->data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, xo = 0, yo = 0, last = 0;
    for (int d = x->ndim - 1; d >= 0; --d) {
      const int64_t k = rest % x->shape[d];
      rest /= x->shape[d];
      if (d == x->ndim - 1) last = k;
      xo += k * x->strides[d];
      yo += k * y->strides[d];
    }
    const float v = xs[xo] + bs[last * b->strides[0]];
    ys[yo] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
  }
  return TD_OK;
}
TD_EXPORT int32_t mylib_fused_bias_gelu_cpu(TdKernelEnv* env) {
  TD_KERNEL_TRY return FusedBiasGelu(env); TD_KERNEL_CATCH(env)
}
TD_EXPORT int32_t mylib_broken_cpu(TdKernelEnv* env) { return td_fail(env, "the kernel says no (x has 3 elements)"); }
TD_EXPORT int32_t mylib_badutf_cpu(TdKernelEnv* env) { return td_fail(env, "bytes \xff\xfe are not UTF-8"); }

static const TdOpDecl kOps[] = {
    {"mylib::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor",
     "check bias.dim() == 1 and bias.size(0) == x.size(-1), \"bias must be [{x.size(-1)}], got {bias.shape}\"\n"
     "return empty(x.shape, dtype=promote(x, bias))",
     NULL, "mylib_fused_bias_gelu_cpu", NULL},
    {"mylib::broken(Tensor x) -> Tensor", "like:clone", NULL, "mylib_broken_cpu", NULL},
    {"mylib::badutf(Tensor x) -> Tensor", "like:clone", NULL, "mylib_badutf_cpu", NULL},
};
TD_DEFINE_LIBRARY("mylib", kOps)
"""


def gelu_ref(v):
    from math import erf
    return np.array([0.5 * t * (1 + erf(t / np.sqrt(2))) for t in v.ravel()], dtype=np.float32).reshape(v.shape)


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    if not DAEMON_BIN:
        pytest.skip("no tensord binary: build the `tensord` target or set TENSORD_BIN")
    d = tmp_path_factory.mktemp("kernel")
    (d / "mylib.cc").write_text(KERNEL)
    out = d / "mylib.tdk"
    r = subprocess.run([DAEMON_BIN, "build-kernel", "-o", str(out), str(d / "mylib.cc")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def lib(artifact):
    return tensord.library.load(artifact)


@pytest.fixture(scope="module")
def any_session():
    """A session on a daemon that runs any artifact (`--artifacts any`)."""
    d = Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"])
    s = tensord.connect(d.address, set_default=False)
    yield s, d
    s.close()
    d.stop()


def test_load_defines_the_ops_for_meta_mode(lib):
    assert lib.name == "mylib"
    assert len(lib.content_hash) == 64
    assert lib.ops == ["mylib::fused_bias_gelu", "mylib::broken", "mylib::badutf"]
    assert lib.fused_bias_gelu is tensord.ops.mylib.fused_bias_gelu
    x = tensord.empty(8, 16, device="meta")
    y = lib.fused_bias_gelu(x, tensord.empty(16, device="meta"))
    assert y.shape == (8, 16) and y.dtype == tensord.float32 and y.device.type == "meta"
    with pytest.raises(RuntimeError, match=r"mylib::fused_bias_gelu: bias must be \[16\], got \[15\]"):
        lib.fused_bias_gelu(x, tensord.empty(15, device="meta"))
    again = tensord.library.load(lib.path)  # a second load: the same ops
    assert again.content_hash == lib.content_hash and again.fused_bias_gelu is lib.fused_bias_gelu


def test_runs_in_the_daemon(lib, any_session):
    s, _ = any_session
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 6)).astype(np.float32)
    bv = rng.standard_normal(6).astype(np.float32)
    with s:
        x = tensord.tensor(xv)
        b = tensord.tensor(bv)
        y = lib.fused_bias_gelu(x, b)
        np.testing.assert_allclose(y.numpy(), gelu_ref(xv + bv), rtol=1e-5, atol=1e-6)
        # A strided (transposed) x: the kernel reads it through its strides.
        xt = tensord.tensor(xv.T.copy()).t()
        np.testing.assert_allclose(lib.fused_bias_gelu(xt, b).numpy(), gelu_ref(xv + bv), rtol=1e-5, atol=1e-6)


def test_kernel_error_surfaces_at_the_sync_point_and_the_session_goes_on(lib, any_session):
    s, _ = any_session
    with s:
        y = lib.broken(tensord.ones(3))
        with pytest.raises(RuntimeError, match=r"mylib::broken \(call \d+ at test_artifacts.py:\d+\): the kernel says no "
                                                 r"\(x has 3 elements\)"):
            y.numpy()
        assert (tensord.ones(2) + 1).tolist() == [2.0, 2.0]
        # A message that is not UTF-8 reaches the client with the bad bytes
        # replaced, and the session goes on.
        with pytest.raises(RuntimeError, match="bytes \ufffd\ufffd are not UTF-8"):
            lib.badutf(tensord.ones(1)).numpy()
        assert (tensord.ones(2) * 3).tolist() == [3.0, 3.0]


def test_second_session_sends_no_bytes(lib, any_session, artifact):
    s1, d = any_session
    with s1:
        lib.fused_bias_gelu(tensord.zeros(1, 3), tensord.zeros(3)).tolist()
    # The first session sent it once, with every other library this process
    # loaded (other test files load theirs) that the daemon lacked.
    assert s1.stats()["artifact_bytes_sent"] >= os.path.getsize(artifact)
    s2 = tensord.connect(d.address, set_default=False)
    try:
        with s2:
            y = lib.fused_bias_gelu(tensord.zeros(2, 3), tensord.zeros(3))
            assert y.tolist() == [[0.0] * 3] * 2
        assert s2.stats()["artifact_bytes_sent"] == 0  # the daemon had it: asked by hash, nothing sent
    finally:
        s2.close()


def test_policy_refuses_the_upload(lib):
    with Daemon(DAEMON_BIN) as d:  # `tensord serve` defaults to --artifacts trusted with an empty allow-list
        s = tensord.connect(d.address, set_default=False)
        try:
            with s:
                x = tensord.zeros(2, 3)
                with pytest.raises(RuntimeError, match=r"refused the artifact.*--artifacts trusted.*"
                                                       + lib.content_hash):
                    lib.fused_bias_gelu(x, tensord.zeros(3))
                assert (x + 1).sum().item() == 6.0  # the session goes on
        finally:
            s.close()
    with Daemon(DAEMON_BIN, extra_args=["--artifacts", "off"]) as d:
        s = tensord.connect(d.address, set_default=False)
        try:
            with s, pytest.raises(RuntimeError, match=r"--artifacts off"):
                lib.fused_bias_gelu(tensord.zeros(2, 3), tensord.zeros(3))
        finally:
            s.close()


def test_allow_list_admits_it_and_a_refused_library_fails_only_its_own_ops(lib, tmp_path):
    # Another library in the same process, which the daemon does not allow.
    other = tensord.cpp_extension.load_inline("otherlib", cpp_sources=TWICE.replace("extlib", "otherlib"),
                                              build_directory=tmp_path)
    allow = tmp_path / "allow"
    allow.write_text(f"{lib.content_hash}  mylib.tdk\n")
    with Daemon(DAEMON_BIN, extra_args=["--artifact-allow-list", str(allow)]) as d:
        s = tensord.connect(d.address, set_default=False)
        try:
            with s:
                assert lib.fused_bias_gelu(tensord.zeros(1, 2), tensord.zeros(2)).tolist() == [[0.0, 0.0]]
                with pytest.raises(RuntimeError, match=r"otherlib::twice: .*artifact otherlib .* is refused"):
                    other.twice(tensord.ones(2))
                assert lib.fused_bias_gelu(tensord.zeros(1, 1), tensord.zeros(1)).tolist() == [[0.0]]
        finally:
            s.close()


def test_an_artifact_that_fails_to_load_fails_only_its_own_ops(artifact, tmp_path):
    # The manifest edited after the build (a shape rule changed; the rule is
    # valid, so every check before the load passes): the object's own
    # declaration then differs, and the daemon refuses to bind it. Its ops'
    # calls fail saying so; the session and later syncs are unaffected.
    import json
    import struct
    data = artifact.read_bytes()
    m_len, p_len = struct.unpack_from("<IQ", data, 12)
    manifest = json.loads(data[24:24 + m_len])
    manifest["ops"][1]["shape_rule"] = "like:neg"
    m = json.dumps(manifest).encode()
    edited = tmp_path / "edited.tdk"
    edited.write_bytes(data[:8] + struct.pack("<IIQ", 1, len(m), p_len) + m + data[24 + m_len:])
    script = tmp_path / "use.py"
    script.write_text(textwrap.dedent(f"""
        import sys, tensord
        s = tensord.connect(sys.argv[1])
        lib = tensord.library.load({str(edited)!r})
        try:
            lib.broken(tensord.ones(2)).numpy()
        except RuntimeError as e:
            print("ERROR", e)
        print("SUM", (tensord.ones(3) * 2).sum().item())
    """))
    with Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"]) as d:
        env = dict(os.environ, PYTHONPATH=os.path.dirname(tensord.__path__[0]), TENSORD_BIN=DAEMON_BIN)
        r = subprocess.run([sys.executable, str(script), d.address], capture_output=True, text=True, timeout=120,
                           env=env)
    assert r.returncode == 0, r.stderr
    assert "ERROR mylib::broken" in r.stdout and "does not match the manifest" in r.stdout, r.stdout
    assert "SUM 6.0" in r.stdout


def test_broken_files_are_refused_by_the_client(artifact, tmp_path):
    data = artifact.read_bytes()
    cut = tmp_path / "cut.tdk"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(RuntimeError, match="truncated"):
        tensord.library.load(cut)
    flipped = bytearray(data)
    flipped[-50] ^= 1
    bad = tmp_path / "bad.tdk"
    bad.write_bytes(bytes(flipped))
    with pytest.raises(RuntimeError, match="SHA-256"):
        tensord.library.load(bad)
    with pytest.raises(FileNotFoundError):
        tensord.library.load(tmp_path / "missing.tdk")


def test_tensord_check_runs_a_script_that_loads_an_artifact(artifact, tmp_path):
    script = tmp_path / "model.py"
    script.write_text(textwrap.dedent(f"""
        import tensord
        lib = tensord.library.load({str(artifact)!r})
        x = tensord.randn(8, 16)
        y = lib.fused_bias_gelu(x, tensord.randn(16))
        assert y.shape == (8, 16)
        lib.fused_bias_gelu(x, tensord.randn(3))
    """))
    r = run_tensord_check(script)
    assert r.returncode != 0
    assert "bias must be [16], got [3]" in r.stderr
    assert "model.py:7" in r.stderr


# ---- tensord.cpp_extension

TWICE = r"""
TD_EXPORT int32_t extlib_twice_cpu(TdKernelEnv* env) {
  const DLTensor* x = env->args[0].value.tensor;
  DLTensor* y = &env->outputs[0];
  int64_t n = 1;
  for (int d = 0; d < x->ndim; ++d) n *= x->shape[d];
  for (int64_t i = 0; i < n; ++i) static_cast<float*>(y->data)[i] = 2 * static_cast<const float*>(x->data)[i];
  return TD_OK;
}
static const TdOpDecl kOps[] = {{"extlib::twice(Tensor x) -> Tensor", "return empty(x.shape)", NULL,
                                 "extlib_twice_cpu", NULL}};
TD_DEFINE_LIBRARY("extlib", kOps)
"""


def test_cpp_extension_load_inline_builds_caches_and_runs(tmp_path, any_session):
    assert tensord.cpp_extension.is_available()
    lib = tensord.cpp_extension.load_inline("extlib", cpp_sources=TWICE, build_directory=tmp_path)
    assert lib.path == str(tmp_path / "extlib.tdk")
    first = os.path.getmtime(lib.path)
    s, _ = any_session
    with s:
        assert lib.twice(tensord.tensor([1.0, 2.5])).tolist() == [2.0, 5.0]
    # The same sources and flags again: the cached artifact, the same ops.
    again = tensord.cpp_extension.load_inline("extlib", cpp_sources=TWICE, build_directory=tmp_path)
    assert again.content_hash == lib.content_hash and again.twice is lib.twice
    assert os.path.getmtime(again.path) >= first
    assert tensord.cpp_extension.load_module(again.path).content_hash == lib.content_hash


def test_cpp_extension_errors(tmp_path):
    with pytest.raises(RuntimeError, match=r"(?s)build-kernel failed.*error"):
        tensord.cpp_extension.build_inline("badlib", cpp_sources="this is not C++", build_directory=tmp_path)
    bad_rule = TWICE.replace("extlib", "rulelib").replace("return empty(x.shape)", "return empty(y.shape)")
    with pytest.raises(RuntimeError, match=r"'y' is not an argument of the op"):
        tensord.cpp_extension.build_inline("rulelib", cpp_sources=bad_rule, build_directory=tmp_path)
    with pytest.raises(ValueError, match="identifier"):
        tensord.cpp_extension.build_inline("not-a-name", cpp_sources=TWICE, build_directory=tmp_path)
    with pytest.raises(FileNotFoundError):
        tensord.cpp_extension.build("extlib", [str(tmp_path / "missing.cc")], build_directory=tmp_path)


def test_build_on_the_daemon(tmp_path):
    """The daemon builds the sources with its own toolchain, keeps the
    artifact and sends it back: loading it then uploads nothing. A daemon
    that does not run any artifact refuses to build."""
    script = tmp_path / "remote.py"
    script.write_text(textwrap.dedent(f"""
        import sys, tensord
        s = tensord.connect(sys.argv[1])
        src = {TWICE.replace("extlib", "remotelib")!r}
        try:
            lib = tensord.cpp_extension.load_inline("remotelib", cpp_sources=src, build_on="daemon",
                                                    build_directory={str(tmp_path)!r})
        except RuntimeError as e:
            print("REFUSED", e)
            sys.exit(0)
        print("RESULT", lib.twice(tensord.tensor([1.5, -2.0])).tolist())
        print("SENT", s.stats()["artifact_bytes_sent"])
        try:
            tensord.cpp_extension.build_inline("brokenlib", cpp_sources="not C++", build_on="daemon",
                                               build_directory={str(tmp_path)!r})
        except RuntimeError as e:
            print("BUILDERROR", e)
    """))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(tensord.__path__[0]), TENSORD_BIN=DAEMON_BIN)
    env.pop("TENSORD_ADDRESS", None)
    with Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"]) as d:
        r = subprocess.run([sys.executable, str(script), d.address], capture_output=True, text=True, timeout=300,
                           env=env)
    assert r.returncode == 0, r.stderr
    assert "RESULT [3.0, -4.0]" in r.stdout, r.stdout + r.stderr
    assert "SENT 0" in r.stdout
    assert "BUILDERROR" in r.stdout and "the build of brokenlib failed" in r.stdout and "error" in r.stdout
    assert os.path.exists(tmp_path / "remotelib.tdk")
    with Daemon(DAEMON_BIN) as d:
        r = subprocess.run([sys.executable, str(script), d.address], capture_output=True, text=True, timeout=300,
                           env=env)
    assert r.returncode == 0, r.stderr
    assert "REFUSED" in r.stdout and "only --artifacts any builds for clients" in r.stdout, r.stdout


def test_a_signed_artifact_runs_on_a_daemon_that_lists_the_key(artifact, lib, tmp_path):
    key, pub = tmp_path / "team.pem", tmp_path / "team.pub"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
    signed = tmp_path / "mylib.tdk"
    signed.write_bytes(artifact.read_bytes())
    r = subprocess.run([DAEMON_BIN, "sign-kernel", "--key", str(key), str(signed)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert lib.content_hash in r.stdout                           # signing does not rename the artifact
    with Daemon(DAEMON_BIN, extra_args=["--artifact-key", str(pub)]) as d:
        s = tensord.connect(d.address, set_default=False)
        try:
            with s:
                # The process holds the unsigned copy (loaded first): refused.
                with pytest.raises(RuntimeError, match="carries no signature"):
                    lib.fused_bias_gelu(tensord.zeros(1, 2), tensord.zeros(2))
        finally:
            s.close()
        # Loading the signed file gives the same ops, and sessions upload
        # its bytes from then on.
        again = tensord.library.load(signed)
        assert again.content_hash == lib.content_hash and again.fused_bias_gelu is lib.fused_bias_gelu
        s = tensord.connect(d.address, set_default=False)
        try:
            with s:
                assert lib.fused_bias_gelu(tensord.zeros(1, 2), tensord.zeros(2)).tolist() == [[0.0, 0.0]]
        finally:
            s.close()


# Kernels that kill or hang their process, beside a good one and the
# fused bias + GELU of KERNEL (copied in, for a comparison with in-process).
HOSTILE = KERNEL.replace("TD_DEFINE_LIBRARY(\"mylib\", kOps)", "").replace("mylib", "hostile").replace(
    "static const TdOpDecl kOps[]", "static const TdOpDecl kUnused[]") + r"""
#include <cstdlib>
TD_EXPORT int32_t hostile_segv_cpu(TdKernelEnv*) {
  volatile int* p = reinterpret_cast<volatile int*>(16);  // not mapped: a real SIGSEGV
  *p = 1;
  return TD_OK;
}
TD_EXPORT int32_t hostile_abort_cpu(TdKernelEnv*) { std::abort(); }
TD_EXPORT int32_t hostile_spin_cpu(TdKernelEnv*) {
  for (volatile unsigned long i = 0;; i = i + 1) {
  }
}
static const TdOpDecl kOps[] = {
    {"hostile::fused_bias_gelu(Tensor x, Tensor bias) -> Tensor", "return empty(x.shape, dtype=promote(x, bias))",
     NULL, "hostile_fused_bias_gelu_cpu", NULL},
    {"hostile::segv(Tensor x) -> Tensor", "like:clone", NULL, "hostile_segv_cpu", NULL},
    {"hostile::abort(Tensor x) -> Tensor", "like:clone", NULL, "hostile_abort_cpu", NULL},
    {"hostile::spin(Tensor x) -> Tensor", "like:clone", NULL, "hostile_spin_cpu", NULL},
    {"hostile::broken(Tensor x) -> Tensor", "like:clone", NULL, "hostile_broken_cpu", NULL},
};
TD_DEFINE_LIBRARY("hostile", kOps)
"""


def _children(pid):
    """Process ids whose parent is `pid` (the daemon's workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


def test_isolation_survives_hostile_kernels(tmp_path):
    """Under --artifact-isolation process a segfault, an abort and an
    endless loop in a kernel each fail only their call, naming the op; the
    session's next call runs in a new worker, another session is
    unaffected, results equal the in-process ones, and closing the sessions
    ends their workers."""
    if not DAEMON_BIN:
        pytest.skip("no tensord binary: build the `tensord` target or set TENSORD_BIN")
    path = build_kernel(tmp_path, "hostile", HOSTILE)
    lib = tensord.library.load(path)
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((5, 7)).astype(np.float32)
    bv = rng.standard_normal(5).astype(np.float32)
    expected = {}
    with Daemon(DAEMON_BIN, extra_args=["--artifacts", "any"]) as d:  # in-process, for the comparison
        s = tensord.connect(d.address, set_default=False)
        with s:
            expected["t"] = lib.fused_bias_gelu(tensord.tensor(xv).t(), tensord.tensor(bv)).numpy()
        s.close()
    with Daemon(DAEMON_BIN, extra_args=["--artifacts", "any", "--artifact-isolation", "process",
                                        "--artifact-call-timeout", "1"]) as d:
        s = tensord.connect(d.address, set_default=False)
        other = tensord.connect(d.address, set_default=False)
        try:
            with other:
                assert lib.fused_bias_gelu(tensord.zeros(1, 2), tensord.zeros(2)).tolist() == [[0.0, 0.0]]
            with s:
                # A strided (transposed) input: the same as in the daemon's process.
                np.testing.assert_array_equal(
                    lib.fused_bias_gelu(tensord.tensor(xv).t(), tensord.tensor(bv)).numpy(), expected["t"])
                for op, what in [("segv", r"signal 11 \(Segmentation fault\)"), ("abort", r"signal 6 \(Aborted\)"),
                                 ("spin", r"ran past the time limit of 1s")]:
                    with pytest.raises(RuntimeError, match=rf"hostile::{op} \(call \d+ at test_artifacts.py:\d+\): "
                                                           rf".*{what}"):
                        getattr(lib, op)(tensord.ones(2)).numpy()
                    # The next call: a new worker.
                    assert lib.fused_bias_gelu(tensord.zeros(1, 3), tensord.zeros(3)).tolist() == [[0.0] * 3]
                # A kernel's own error comes through as in-process.
                with pytest.raises(RuntimeError, match=r"hostile::broken \(call \d+ at test_artifacts.py:\d+\): the "
                                                       r"kernel says no \(x has 3 elements\)"):
                    lib.broken(tensord.ones(3)).numpy()
                assert (tensord.ones(2) + 1).tolist() == [2.0, 2.0]
            with other:  # its worker never saw the hostile calls
                np.testing.assert_array_equal(
                    lib.fused_bias_gelu(tensord.tensor(xv).t(), tensord.tensor(bv)).numpy(), expected["t"])
            assert len(_children(d.proc.pid)) == 2  # one worker per session
        finally:
            s.close()
            other.close()
        deadline = time.monotonic() + 10
        while _children(d.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _children(d.proc.pid) == []  # closing a session ends (and reaps) its worker
        assert d.proc.poll() is None  # the daemon still serves
        s = tensord.connect(d.address, set_default=False)
        with s:
            assert (tensord.ones(3) * 2).sum().item() == 6.0
        s.close()


def test_an_embedded_daemon_a_kernel_crashed_is_named(tmp_path):
    """Without isolation a crashing kernel takes its daemon with it; for an
    embedded daemon the client says so, and how it ended, rather than only
    that the stream broke."""
    if not DAEMON_BIN:
        pytest.skip("no tensord binary")
    path = build_kernel(tmp_path, "hostile", HOSTILE)
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""
        import tensord
        lib = tensord.library.load({str(path)!r})
        tensord.connect()  # embedded
        try:
            lib.segv(tensord.ones(2)).tolist()
        except RuntimeError as e:
            print("ERROR:", e)
    """))
    env = subprocess_env()
    env.pop("TENSORD_ADDRESS", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ERROR:" in r.stdout
    assert re.search(r"the embedded daemon \(pid \d+\) was ended by signal 11 \(Segmentation fault\)", r.stdout), r.stdout
