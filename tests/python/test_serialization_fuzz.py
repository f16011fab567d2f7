"""A bounded mutation fuzz of the safetensors header reader (tensord.load's
_parse_header, load_metadata and load(map_location='meta')).

libFuzzer cannot drive Python and Debian 12 has no atheris, so this is a
fixed-seed mutation loop instead: it starts from the seed files in
tests/fuzz/corpus/safetensors, applies byte and JSON-aware mutations, and
checks that every input gives either a result or the errors load documents
(RuntimeError for a malformed file, TypeError for an unsupported dtype) —
never another exception, a hang or a huge allocation. Inputs that once
failed live in tests/fuzz/regressions/safetensors and run first.
TENSORD_FUZZ_ITERATIONS sets the number of mutations (default 3000, a few
seconds); `make fuzz` runs more.
"""
import io
import json
import os
import random
import struct

import pytest

import tensord
from tensord import serialization

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "safetensors")
REGRESSIONS = os.path.join(ROOT, "tests", "fuzz", "regressions", "safetensors")
ITERATIONS = int(os.environ.get("TENSORD_FUZZ_ITERATIONS", "3000"))

INTERESTING_INTS = [0, 1, -1, 7, 8, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, 2**100, -2**63]
# Values of the nested-object metadata (serialization._unflatten's input).
TREES = ["[1", "{}", '{"d": 5}', '{"d": [1]}', '{"d": [[[1], {"v": 1}]]}', '{"l": 5}', '{"t": 0}', '{"t": "zz"}',
         '{"u": [{"v": null}]}', '{"x": 1}', '{"l": [' * 5000 + "]}" * 5000, '{"v": 1, "l": []}']
INTERESTING_JSON = [b"null", b"true", b"[]", b"{}", b'""', b"1e400", b"-0", b"NaN", b"Infinity", b"1.5",
                    b"[[[[[[[[[[]]]]]]]]]]", b'"\\ud800"', b"18446744073709551616", b'{"a":1}']


def files(d):
    if not os.path.isdir(d):
        return []
    return [open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d))]


def named(*dirs):
    return [pytest.param(open(os.path.join(d, n), "rb").read(), id=f"{os.path.basename(d)}/{n}")
            for d in dirs if os.path.isdir(d) for n in sorted(os.listdir(d))]


def check(data):
    """Runs the header readers on `data`; fails on anything but a result or an allowed error."""
    for fn in (lambda: serialization._parse_header(io.BytesIO(data)),
               lambda: serialization.load_metadata(io.BytesIO(data)),
               lambda: tensord.load(io.BytesIO(data), map_location="meta")):
        try:
            fn()
        except RecursionError as e:
            # A RuntimeError subclass, but the reader's own stack gave out:
            # the file's nesting must be refused by name instead.
            raise AssertionError(f"RecursionError: {e}\ninput: {data[:300]!r}") from e
        except RuntimeError:
            pass
        except TypeError as e:
            # Documented for a dtype tensord lacks; any other TypeError is a
            # malformed file reported as the wrong error.
            if "dtype" not in str(e):
                raise AssertionError(f"TypeError: {e}\ninput: {data[:300]!r}") from e
        except Exception as e:  # noqa: BLE001 - anything else is the finding
            raise AssertionError(f"{type(e).__name__}: {e}\ninput: {data[:300]!r}") from e


def split(data):
    """(header bytes, data region) of a well-formed seed."""
    (n,) = struct.unpack("<Q", data[:8])
    return data[8:8 + n], data[8 + n:]


def join(header, region, length=None):
    return struct.pack("<Q", len(header) if length is None else length) + header + region


def mutate(rng, data):
    header, region = split(data) if len(data) >= 8 else (data, b"")
    kind = rng.randrange(9)
    h = bytearray(header)
    if kind == 0 and h:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            h[rng.randrange(len(h))] = rng.randrange(256)
    elif kind == 1 and h:  # delete a span
        i = rng.randrange(len(h))
        del h[i:i + rng.randint(1, 16)]
    elif kind == 2:  # insert an interesting JSON value
        i = rng.randrange(len(h) + 1)
        h[i:i] = rng.choice(INTERESTING_JSON)
    elif kind == 3:  # replace a number with an interesting one
        digits = [i for i, c in enumerate(h) if 48 <= c <= 57]
        if digits:
            i = rng.choice(digits)
            j = i
            while j < len(h) and 48 <= h[j] <= 57:
                j += 1
            h[i:j] = str(rng.choice(INTERESTING_INTS)).encode()
    elif kind == 4:  # a wrong header length
        return join(bytes(h), region, rng.choice([0, 1, max(0, len(h) - 1), len(h) + 1, 2**63, 2**64 - 1, 10**8 + 1]))
    elif kind == 5:  # truncate the file
        whole = join(bytes(h), region)
        return whole[:rng.randrange(len(whole) + 1)]
    elif kind == 6:  # a deeply nested value
        depth = rng.choice([10, 100, 1000, 5000, 100000])
        i = rng.randrange(len(h) + 1)
        h[i:i] = b"[" * depth + b"]" * depth
    elif kind == 7:  # structural: rewrite a parsed header's fields
        try:
            obj = json.loads(bytes(h))
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict) and obj:
            name = rng.choice(list(obj))
            entry = obj[name]
            field = rng.choice(["dtype", "shape", "data_offsets", "extra", "__metadata__", "name"])
            value = rng.choice([rng.choice(INTERESTING_INTS), [rng.choice(INTERESTING_INTS)] * rng.randint(0, 9),
                                "F32", "U64", "X", None, True, 1.5, {}, [[1]], [-1, 2], [5, 3]])
            if field == "__metadata__":
                obj["__metadata__"] = rng.choice([{"k": "v"}, {"k": 1}, [], "s"] + [{"tensord.tree": t} for t in TREES])
            elif field == "name":
                obj[rng.choice(["", "\u0000", "é" * 3, "__metadata__", "a" * 1000])] = entry
            elif isinstance(entry, dict):
                entry[field] = value
            h = bytearray(json.dumps(obj).encode())
    else:  # splice two headers
        return join(bytes(h[:rng.randrange(len(h) + 1)]) + bytes(h[rng.randrange(len(h) + 1):]), region)
    return join(bytes(h), region)


@pytest.mark.parametrize("data", named(REGRESSIONS, CORPUS))
def test_corpus_and_regressions(data):
    check(data)


def test_mutations_raise_only_documented_errors():
    seeds = files(CORPUS)
    assert seeds, "the seed corpus tests/fuzz/corpus/safetensors is missing"
    rng = random.Random(20261206)
    for _ in range(ITERATIONS):
        data = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            data = mutate(rng, data)
        check(data)
