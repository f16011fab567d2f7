"""The layer rules of docs/architecture.md, checked on every #include of the sources.

Nothing points upward: meta/ knows no wire, transport, protobuf, gRPC or
device API; kernels/ never sees a session, the runtime, the wire, the
transport or protobuf; the runtime knows no protobuf, gRPC, daemon, backend
or device API; a backend knows no session or wire; the transport (stream
framing, side channel, connect) and the wire conversions above it know
neither the daemon nor the client; the clients never include the daemon.
A violation names the file, the line and the rule.
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

# folder -> include prefixes (or fragments) it must not use, and why
RULES = {
    "meta": (("grpc", "google/protobuf", "tensord/v1/", "tensord/wire/", "tensord/transport/", "tensord/server/",
              "tensord/client/", "tensord/kernels/", "cuda", "cublas"), "meta/ depends on abseil only"),
    "kernels": (("grpc", "google/protobuf", "tensord/v1/", "tensord/wire/", "tensord/transport/", "tensord/server/",
                 "tensord/client/", "tensord/runtime/", "tensord/backends/"),
                "kernels/ compute into given outputs: no session, runtime, wire, transport or protobuf"),
    "server/runtime": (("grpc", "google/protobuf", "tensord/v1/", "tensord/wire/", "tensord/transport/",
                        "tensord/server/", "tensord/client/", "tensord/backends/", "cuda", "cublas"),
                       "the runtime is device-neutral: no protobuf, gRPC, daemon, backend or device API"),
    "server/backends": (("grpc", "google/protobuf", "tensord/v1/", "tensord/wire/", "tensord/transport/",
                         "tensord/server/", "tensord/client/"),
                        "a backend serves the runtime: no session, wire or protobuf"),
    "server/src": (("cuda_runtime", "cuda.h", "cuda_fp16", "cublas", "cudnn", "nvrtc"),
                   "the daemon reaches a device only through its backend (server/backends/*): no device API"),
    "proto/wire": (("tensord/server/", "tensord/client/"), "the wire conversions serve both sides, and know neither"),
    "proto/transport": (("tensord/server/", "server/src", "tensord/client/", "tensord/kernels/", "tensord/wire/"),
                        "the transport serves both sides and knows neither; it sits below the wire conversions "
                        "(wire's data chunks name its DataDestination), so it never includes them"),
    "client": (("tensord/server/", "server/src", "tensord/kernels/"), "the client talks to a daemon, it does not link one"),
    "python-client/src": (("tensord/server/", "server/src", "tensord/kernels/"), "the binding wraps client/ only"),
}


def _sources(folder):
    base = ROOT / folder
    for ext in ("*.h", "*.cc", "*.cu", "*.cuh"):
        yield from base.rglob(ext)


def test_no_layer_includes_upward():
    broken = []
    checked = 0
    for folder, (banned, why) in RULES.items():
        for path in _sources(folder):
            checked += 1
            text = path.read_text(errors="replace")
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if any(b in target for b in banned):
                    line = text.count("\n", 0, m.start()) + 1
                    broken.append(f"{path.relative_to(ROOT)}:{line}: #include {target} ({why})")
    assert checked > 50, f"only {checked} sources found: the folders moved?"
    assert not broken, "\n".join(broken)
