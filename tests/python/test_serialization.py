"""tensord.save / tensord.load in the safetensors format.

Files are checked byte by byte against an independent reading of the
specification (struct + json here, not tensord's reader), files built by hand
here are read by tensord, and meta loading is shown to read only the header:
it works on a file whose data region is cut off, where a real load fails.
"""
import json
import struct

import numpy as np
import pytest

import tensord
from tensord import serialization

NP = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1",
      "BOOL": "?"}


def read_independently(path):
    """(header dict, data region bytes, header length) of a safetensors file, by the spec alone."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    return header, raw[8 + n:], n


def build_file(path, tensors, metadata=None, pad=True):
    """Writes a safetensors file by hand: tensors is a list of (name, code, shape, raw bytes)."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, code, shape, blob in tensors:
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode()
    if pad:
        text += b" " * ((-len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def test_save_layout_follows_the_spec(session, tmp_path):
    a = tensord.tensor([[1.5, -2.0, 3.25], [0.0, 4.0, -0.5]])
    b = tensord.tensor([7, -8, 9], dtype=tensord.int64)
    c = tensord.tensor([True, False, True])
    d = tensord.tensor([1.0, 2.0], dtype=tensord.float16)
    path = tmp_path / "x.safetensors"
    tensord.save({"a": a, "b": b, "c": c, "d": d}, path, metadata={"format": "pt", "note": "é"})
    header, data, n = read_independently(path)
    assert (8 + n) % 8 == 0, "the header is padded to a multiple of 8"
    assert list(header) == ["__metadata__", "a", "b", "c", "d"]
    assert header["__metadata__"] == {"format": "pt", "note": "é"}
    assert header["a"]["dtype"] == "F32" and header["a"]["shape"] == [2, 3]
    assert header["b"]["dtype"] == "I64" and header["c"]["dtype"] == "BOOL" and header["d"]["dtype"] == "F16"
    spans = sorted(tuple(header[k]["data_offsets"]) for k in "abcd")
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    assert all(x[1] == y[0] for x, y in zip(spans, spans[1:])), "no gaps or overlaps"
    for k, t in {"a": a, "b": b, "c": c, "d": d}.items():
        lo, hi = header[k]["data_offsets"]
        assert lo % t.dtype.itemsize == 0, "each tensor is aligned to its element size"
        got = np.frombuffer(data[lo:hi], dtype=NP[header[k]["dtype"]]).reshape(header[k]["shape"])
        np.testing.assert_array_equal(got, t.numpy())


def test_round_trip_every_dtype_and_layout(session, tmp_path):
    src = {
        "f32": tensord.randn(3, 4),
        "f64": tensord.randn(2, 2, dtype=tensord.float64),
        "f16": tensord.randn(5).half(),
        "bf16": tensord.randn(2, 3).to(tensord.bfloat16),
        "e4m3": (tensord.randn(9) * 10).to(tensord.float8_e4m3fn),
        "e5m2": (tensord.randn(9) * 100).to(tensord.float8_e5m2),
        "i64": tensord.arange(6).reshape(2, 3),
        "i32": tensord.tensor([1, -2, 3], dtype=tensord.int32),
        "i16": tensord.tensor([-300, 300], dtype=tensord.int16),
        "i8": tensord.tensor([-5, 5], dtype=tensord.int8),
        "u8": tensord.tensor([0, 255], dtype=tensord.uint8),
        "bool": tensord.tensor([[True], [False]]),
        "transposed": tensord.randn(3, 4).T,           # non-contiguous: written contiguously
        "scalar": tensord.tensor(2.5),
        "empty": tensord.zeros(0, 3),
    }
    path = tmp_path / "all.safetensors"
    tensord.save(src, str(path))
    out = tensord.load(path)
    assert list(out) == list(src)
    for k, t in src.items():
        r = out[k]
        assert r.dtype is t.dtype and r.shape == t.shape and r.device == tensord.device("cpu"), k
        assert r.is_contiguous()
        np.testing.assert_array_equal(r._host_array(), t._host_array(), err_msg=k)


def test_bf16_and_float8_bytes(session, tmp_path):
    # Exact bit patterns: bfloat16 1.0 = 0x3F80, -2.0 = 0xC000; e4m3fn 1.0 = 0x38, -0.5 = 0xB0, 448 = 0x7E;
    # e5m2 1.0 = 0x3C, 57344 = 0x7B.
    path = tmp_path / "b.safetensors"
    tensord.save({"bf": tensord.tensor([1.0, -2.0]).to(tensord.bfloat16),
                  "e4": tensord.tensor([1.0, -0.5, 448.0]).to(tensord.float8_e4m3fn),
                  "e5": tensord.tensor([1.0, 57344.0]).to(tensord.float8_e5m2)}, path)
    header, data, _ = read_independently(path)
    assert header["bf"]["dtype"] == "BF16" and header["e4"]["dtype"] == "F8_E4M3" and header["e5"]["dtype"] == "F8_E5M2"

    def raw(k):
        lo, hi = header[k]["data_offsets"]
        return data[lo:hi]
    assert raw("bf") == bytes([0x80, 0x3F, 0x00, 0xC0])
    assert raw("e4") == bytes([0x38, 0xB0, 0x7E])
    assert raw("e5") == bytes([0x3C, 0x7B])


def test_reads_a_hand_built_file(session, tmp_path):
    path = tmp_path / "hand.safetensors"
    w = np.array([[0.25, -1.0], [3.0, 8.5], [1e-3, -7.0]], dtype="<f4")
    idx = np.array([5, -6, 7], dtype="<i8")
    build_file(path, [("layer.weight", "F32", [3, 2], w.tobytes()),
                      ("idx", "I64", [3], idx.tobytes()),
                      ("half", "BF16", [2], bytes([0x80, 0x3F, 0x40, 0xC0])),   # 1.0, -3.0
                      ("flag", "BOOL", [], b"\x01"),
                      ("none", "F64", [0, 4], b"")],
               metadata={"format": "np"})
    out = tensord.load(path)
    assert list(out) == ["layer.weight", "idx", "half", "flag", "none"]
    np.testing.assert_array_equal(out["layer.weight"].numpy(), w)
    np.testing.assert_array_equal(out["idx"].numpy(), idx)
    assert out["half"].dtype is tensord.bfloat16 and out["half"].float().tolist() == [1.0, -3.0]
    assert out["flag"].dtype is tensord.bool and out["flag"].shape == () and out["flag"].item() is True
    assert out["none"].shape == (0, 4) and out["none"].dtype is tensord.float64
    assert serialization.load_metadata(path) == {"format": "np"}


def test_reads_an_unpadded_header_and_unordered_offsets(session, tmp_path):
    # The spec does not require padding, nor that the header lists tensors in data order.
    path = tmp_path / "odd.safetensors"
    a = np.array([1, 2, 3], dtype="u1")
    b = np.array([4.0], dtype="<f8")
    header = {"b": {"dtype": "F64", "shape": [1], "data_offsets": [3, 11]},
              "a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + a.tobytes() + b.tobytes())
    out = tensord.load(path)
    assert list(out) == ["b", "a"]
    assert out["a"].tolist() == [1, 2, 3] and out["b"].tolist() == [4.0]


def test_written_files_load_in_torch(session, tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "t.safetensors"
    src = {"w": tensord.randn(4, 3), "bf": tensord.randn(5).to(tensord.bfloat16), "i": tensord.arange(4)}
    tensord.save(src, path)
    header, data, _ = read_independently(path)
    for k, t in src.items():
        lo, hi = header[k]["data_offsets"]
        dt = {"F32": torch.float32, "BF16": torch.bfloat16, "I64": torch.int64}[header[k]["dtype"]]
        got = torch.frombuffer(bytearray(data[lo:hi]), dtype=dt).reshape(header[k]["shape"])
        np.testing.assert_array_equal(got.float().numpy(), t.float().numpy())


def test_meta_load_reads_only_the_header(tmp_path):
    # No daemon is needed, and the data region may be missing altogether.
    path = tmp_path / "cut.safetensors"
    build_file(path, [("w", "F32", [128, 64], b"\0" * (128 * 64 * 4)), ("b", "BF16", [128], b"\0" * 256),
                      ("steps", "I64", [], b"\0" * 8)])
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    path.write_bytes(raw[:8 + n])                       # keep the header, drop every data byte
    out = tensord.load(path, map_location="meta")
    assert [k for k in out] == ["w", "b", "steps"]
    assert out["w"].is_meta and out["w"].shape == (128, 64) and out["w"].dtype is tensord.float32
    assert out["b"].dtype is tensord.bfloat16 and out["b"].shape == (128,)
    assert out["steps"].shape == () and out["steps"].dtype is tensord.int64
    out2 = tensord.load(path, map_location=tensord.device("meta"))
    assert out2["w"].shape == (128, 64)
    with open(path, "rb") as f:                          # a file object works too; nothing past the header is read
        tensord.load(f, map_location="meta")
        assert f.tell() == 8 + n


def test_real_load_of_truncated_file_fails(session, tmp_path):
    path = tmp_path / "cut.safetensors"
    build_file(path, [("w", "F32", [4], b"\0" * 16)])
    raw = path.read_bytes()
    path.write_bytes(raw[:-4])
    with pytest.raises(RuntimeError, match="data region of 16 bytes"):
        tensord.load(path)


@pytest.mark.parametrize("mutate, match", [
    (lambda h: h["w"].update(data_offsets=[0, 12]), "needs 16 bytes"),
    (lambda h: h["w"].update(dtype="X9"), "unknown dtype"),
    (lambda h: h["w"].update(shape=[-1]), "non-negative"),
    (lambda h: h["w"].update(extra=1), "exactly the keys"),
    (lambda h: h.update(v={"dtype": "U8", "shape": [1], "data_offsets": [17, 18]}), "gap"),
    (lambda h: h.update(v={"dtype": "U8", "shape": [1], "data_offsets": [15, 16]}), "overlaps"),
])
def test_malformed_headers_are_refused(tmp_path, mutate, match):
    header = {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    mutate(header)
    text = json.dumps(header).encode()
    path = tmp_path / "bad.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 16)
    with pytest.raises(RuntimeError, match=match):
        tensord.load(path, map_location="meta")


def test_garbage_and_unsupported_dtypes(tmp_path):
    p = tmp_path / "g"
    p.write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(RuntimeError, match="exceeds the limit"):
        tensord.load(p, map_location="meta")
    p.write_bytes(struct.pack("<Q", 10) + b"{}")
    with pytest.raises(RuntimeError, match="ended after 2 of the 10 bytes"):
        tensord.load(p, map_location="meta")
    p.write_bytes(struct.pack("<Q", 2) + b"[]")
    with pytest.raises(RuntimeError, match="start with"):
        tensord.load(p, map_location="meta")
    text = b'{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}'
    p.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * 8)
    with pytest.raises(RuntimeError, match="twice"):
        tensord.load(p, map_location="meta")
    build_file(p, [("u", "U16", [1], b"\0\0")])
    with pytest.raises(TypeError, match="U16"):
        tensord.load(p, map_location="meta")


def test_save_refuses_what_safetensors_cannot_hold(session, tmp_path):
    p = tmp_path / "x"
    with pytest.raises(TypeError, match=r"the object\['a'\]\[1\] is of type set, which tensord.save cannot store"):
        tensord.save({"a": [1, {2}]}, p)
    with pytest.raises(TypeError, match=r"a key of the object\['b'\] is of type tuple"):
        tensord.save({"b": {(1, 2): tensord.zeros(1)}}, p)
    with pytest.raises(TypeError, match="is of type complex"):
        tensord.save([1j], p)
    with pytest.raises(ValueError, match="reserved for the structure"):
        tensord.save([tensord.zeros(1)], p, metadata={serialization.TREE_KEY: "x"})
    with pytest.raises(ValueError, match="reserved"):
        tensord.save({"__metadata__": tensord.zeros(1)}, p)
    with pytest.raises(RuntimeError, match="meta device"):
        tensord.save({"a": tensord.zeros(2, device="meta")}, p)
    with pytest.raises(ValueError, match="metadata"):
        tensord.save({"a": tensord.zeros(1)}, p, metadata={"k": 1})
    with pytest.raises(TypeError, match="map_location"):
        tensord.load(p, map_location=lambda s, loc: s)


def test_load_refuses_a_device_the_daemon_lacks(tmp_path):
    path = tmp_path / "w.safetensors"
    tensord.save({"w": tensord.ones(2)}, str(path))
    with pytest.raises(RuntimeError, match="not a device of the daemon"):
        tensord.load(str(path), map_location="cuda:7")


def test_a_nested_checkpoint_round_trips_and_resumes_training(session, tmp_path):
    # An optimizer's state_dict (int keys, a Python int step, tuples, lists)
    # inside a checkpoint with the model's state and plain values: load()
    # gives the same structure back, and training resumed from it takes the
    # same steps as training that never stopped.
    tensord.manual_seed(0)
    model = tensord.nn.Sequential(tensord.nn.Linear(4, 3), tensord.nn.ReLU(), tensord.nn.Linear(3, 2))
    opt = tensord.optim.Adam(model.parameters(), lr=0.05, betas=(0.8, 0.9))
    x = tensord.randn(8, 4)

    def step(m, o):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()

    for _ in range(3):
        step(model, opt)
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3, "note": "ok",
            "best": None, "history": [0.5, float("inf")], "flags": {True: 1, 2.5: (1, "two")}}
    p = tmp_path / "ckpt.safetensors"
    tensord.save(ckpt, p, metadata={"author": "test"})
    got = tensord.load(p)
    assert got["epoch"] == 3 and got["note"] == "ok" and got["best"] is None
    assert got["history"] == [0.5, float("inf")] and got["flags"] == {True: 1, 2.5: (1, "two")}
    st, want = got["optimizer"], opt.state_dict()
    assert sorted(st["state"]) == sorted(want["state"]) == [0, 1, 2, 3]
    assert st["state"][0]["step"] == want["state"][0]["step"] == 3 and isinstance(st["state"][0]["step"], int)
    assert st["param_groups"][0]["betas"] == (0.8, 0.9) and st["param_groups"][0]["params"] == [0, 1, 2, 3]
    for k, v in want["state"][2].items():
        if isinstance(v, tensord.Tensor):
            np.testing.assert_array_equal(st["state"][2][k].numpy(), v.numpy())
    assert serialization.load_metadata(p) == {"author": "test"}
    # Any safetensors reader sees the tensors, named by their paths.
    header = read_independently(p)[0]
    assert "optimizer.state.0.exp_avg" in header and "model.0.weight" in header
    # Resume into fresh objects and compare with the run that went on.
    model2 = tensord.nn.Sequential(tensord.nn.Linear(4, 3), tensord.nn.ReLU(), tensord.nn.Linear(3, 2))
    opt2 = tensord.optim.Adam(model2.parameters(), lr=0.01)
    model2.load_state_dict(got["model"])
    opt2.load_state_dict(got["optimizer"])
    for _ in range(2):
        step(model, opt)
        step(model2, opt2)
    for (k, a), (_, b) in zip(model.state_dict().items(), model2.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    # A flat dict of tensors is stored as before: no structure in the file.
    tensord.save(model.state_dict(), p)
    assert serialization.load_metadata(p) is None and list(tensord.load(p)) == list(model.state_dict())
    # Two paths that give one name are told apart.
    tensord.save({"a.b": tensord.ones(1), "a": {"b": tensord.zeros(1)}}, p)
    both = tensord.load(p)
    assert both["a.b"].item() == 1 and both["a"]["b"].item() == 0
    assert sorted(read_independently(p)[0]) == ["__metadata__", "a.b", "a.b#2"]
