#!/usr/bin/python3
"""Writes the seed corpora of tests/fuzz/corpus/{stream,wire,config}.

The session corpus comes from the session target itself
(TENSORD_FUZZ_WRITE_SEEDS=tests/fuzz/corpus/session build-fuzz/bin/session_fuzz),
which builds its messages with the op table; this script reuses those
messages, wrapped in the side channel's and the TCP stream's framing, and
serializes a few more from protobuf text with protoc.

    python3 tests/fuzz/make_seeds.py   # from the repository root, after the session corpus
"""
import json
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

SHM_MAGIC = 0x314D4854     # "THM1", tensord/transport/shm.h
STREAM_MAGIC = 0x31534454  # "TDS1", tensord/transport/socket_stream.h
HELLO, MAP, UNMAP, HELLO_STREAM = 1, 2, 3, 4
RECORD_MORE, RECORD_END = 1, 2


def frame(op, session_id=0, segment=0, size=0, token=b"", token_size=None):
    """A ShmFrame (64 bytes). session_id 1 is the fuzz target's open session."""
    if token_size is None:
        token_size = len(token)
    return struct.pack("<IIQIIQ32s", SHM_MAGIC, op, session_id, segment, token_size, size, token)


def record(payload, flags=0):
    return struct.pack("<II", STREAM_MAGIC, flags) + payload


def byte_record(payload, flags=0, length=None):
    return struct.pack("<IIQ", STREAM_MAGIC, flags, len(payload) if length is None else length) + payload


def datagrams(items):
    """The targets' input format: each datagram as a 16-bit length and its bytes."""
    return b"".join(struct.pack("<H", len(d)) + d for d in items)


def encode(text):
    """A v1::ClientMessage from protobuf text."""
    return subprocess.run(
        ["protoc", "--encode=tensord.v1.ClientMessage", "-I", os.path.join(ROOT, "proto"),
         "tensord/v1/tensord.proto"], input=text.encode(), capture_output=True, check=True).stdout


def session_messages():
    """The ClientMessages of the session corpus (records with tag % 4 in 0, 1)."""
    out = []
    d = os.path.join(CORPUS, "session")
    for name in sorted(os.listdir(d)):
        data = open(os.path.join(d, name), "rb").read()
        i = 0
        while i + 3 <= len(data):
            tag, n = data[i], data[i + 1] | data[i + 2] << 8
            body = data[i + 3:i + 3 + n]
            i += 3 + n
            if tag % 4 in (0, 1):
                out.append((name, body))
    return out


def write(kind, name, data):
    d = os.path.join(CORPUS, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    i64 = struct.pack("<4q", 0, 1, 1, 0)
    esc = lambda b: "".join("\\%03o" % c for c in b)
    # The session target's starting tensors (handles 1, 2, 3), without shared memory.
    preamble = encode(
        'requests { upload { handle: 1 meta { sizes: 2 sizes: 3 strides: 3 strides: 1 dtype: 8 } '
        'total_bytes: 24 data: "%s" last: true call_id: 1 } } '
        'requests { upload { handle: 2 meta { sizes: 4 strides: 1 dtype: 5 } '
        'total_bytes: 32 data: "%s" last: true call_id: 2 } } '
        'requests { upload { handle: 3 meta { sizes: 4 strides: 1 dtype: 8 } '
        'total_bytes: 16 data: "%s" last: true call_id: 3 } }' % (esc(f32), esc(i64), esc(f32[:16])))
    sync = encode("requests { sync { request_id: 1 } }")
    write_header_seeds(f32, i64)
    messages = session_messages()
    if not messages:
        sys.exit("make_seeds: the session corpus is empty; write it first (see the docstring)")

    # stream: hello on the side channel, then records; and the shared-memory channel.
    hello_stream = frame(HELLO_STREAM, session_id=1)
    for name, body in messages:
        write("stream", "stream_" + name, datagrams([hello_stream, record(preamble), record(body), record(sync)]))
    big = preamble + sync
    chunks = [big[i:i + 40] for i in range(0, len(big), 40)]
    write("stream", "stream_split_records", datagrams(
        [hello_stream] + [record(c, RECORD_MORE) for c in chunks[:-1]] + [record(chunks[-1])]))
    write("stream", "stream_end_record", datagrams([hello_stream, record(sync), record(b"\0\0\0\0bye", RECORD_END)]))
    write("stream", "channel_map_unmap", datagrams(
        [frame(HELLO, session_id=1), frame(MAP, segment=1, size=65536), frame(MAP, segment=2, size=4096),
         frame(UNMAP, segment=1), frame(UNMAP, segment=7), frame(MAP, segment=1, size=1 << 40)]))
    write("stream", "hello_wrong_token", datagrams([frame(HELLO, session_id=1, token=b"x" * 32, token_size=32)]))
    write("stream", "hello_token_too_long", datagrams([frame(HELLO_STREAM, session_id=1, token_size=4096)]))
    write("stream", "not_a_hello", datagrams([record(sync)]))

    # wire: mode byte, then datagrams (modes 0, 1) or bytes (2) or a length and bytes (3).
    write("wire", "frames", b"\0" + datagrams([frame(HELLO, 5, token=b"t" * 8), frame(MAP, segment=3, size=4096),
                                               frame(UNMAP, segment=3), b"\1\2\3"]))
    write("wire", "frames_bad_magic", b"\0" + datagrams([b"\0" * 64]))
    for name, body in messages[:4]:
        write("wire", "records_" + name, b"\1" + datagrams([record(body), record(sync)]))
        write("wire", "bytes_" + name, b"\2" + byte_record(body) + byte_record(sync))
        write("wire", "heads_" + name, b"\3" + struct.pack("<I", 1 << 16) + body)
    write("wire", "records_split", b"\1" + datagrams(
        [record(preamble[:30], RECORD_MORE), record(preamble[30:])]))
    write("wire", "records_end", b"\1" + datagrams([record(struct.pack("<i", 13) + b"why", RECORD_END)]))
    write("wire", "bytes_end", b"\2" + byte_record(struct.pack("<i", 14) + b"shutting down", RECORD_END))
    write("wire", "bytes_huge_length", b"\2" + byte_record(b"", length=1 << 62))
    # A 64 KiB upload (the size from which the placement hook is asked).
    upload = encode('requests { upload { handle: 9 meta { sizes: 16384 strides: 1 dtype: 8 } '
                    'total_bytes: 65536 data: "%s" last: true } }' % ("\\000" * 65536))
    write("wire", "bytes_placed_upload", b"\2" + byte_record(upload))
    write("wire", "heads_upload", b"\3" + struct.pack("<I", 0) + upload[:4096])



def write_header_seeds(f32, i64):
    """The config and safetensors seeds (no session corpus needed)."""
    # config: the daemon's config file.
    configs = {
        "deploy": open(os.path.join(ROOT, "deploy", "tensord.conf"), "rb").read(),
        "all_keys": b"listen = unix:/tmp/t.sock, 127.0.0.1:0, [::1]:7000\n"
                    b"session_memory_limit_bytes = 512MiB\ncpu_cache_limit_bytes = 1G  # comment\n"
                    b"stream_spin_us = 100\ngrpc_threads = 64\nlog_level = debug\n",
        "units": b"session_memory_limit_bytes = 4TB\ncpu_cache_limit_bytes=0\n",
        "too_large": b"session_memory_limit_bytes = 99999999999999999999T\n",
        "bad_line": b"# only a comment\n\n   \nlisten\n",
        "unknown_key": b"colour = blue\n",
        "hex": b"cpu_cache_limit_bytes = 0x10\n",
        "exponent": b"cpu_cache_limit_bytes = 1e9\n",
        "listen_weird": b"listen = [::1, host:99999, :, unix:\n",
    }
    for name, text in configs.items():
        write("config", name, text)

    # safetensors: headers for tests/python/test_serialization_fuzz.py.
    def safetensors(tensors, metadata=None, pad=True):
        header, data = {}, b""
        if metadata is not None:
            header["__metadata__"] = metadata
        for name, code, shape, blob in tensors:
            header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
            data += blob
        text = json.dumps(header, separators=(",", ":")).encode()
        if pad:
            text += b" " * ((-len(text)) % 8)
        return struct.pack("<Q", len(text)) + text + data

    write("safetensors", "two_tensors", safetensors(
        [("w", "F32", [2, 3], f32), ("b", "I64", [4], i64)], metadata={"format": "pt"}))
    write("safetensors", "every_dtype", safetensors(
        [(c, c, [2], b"\0" * (2 * k)) for c, k in
         [("F64", 8), ("F16", 2), ("BF16", 2), ("I32", 4), ("I16", 2), ("I8", 1), ("U8", 1), ("BOOL", 1),
          ("F8_E4M3", 1), ("F8_E5M2", 1)]]))
    write("safetensors", "scalar_and_empty", safetensors(
        [("s", "F32", [], f32[:4]), ("e", "F32", [0, 5], b"")], pad=False))
    write("safetensors", "tree", safetensors(
        [("0", "F32", [1], f32[:4])], metadata={"tensord.tree": json.dumps({"d": [["w", {"l": [{"t": "0"}]}], ["x", {"v": 1}]]})}))
    write("safetensors", "empty_header", safetensors([]))



if __name__ == "__main__":
    main()
