#!/usr/bin/python3
"""Reading and writing safetensors files with nothing but numpy (the format is simple:
an 8-byte little-endian header length, a JSON header, raw little-endian data)."""
import json
import struct

import numpy as np

# Every dtype numpy has; BF16 (which it lacks) is read as float32 and written from the
# raw uint16 bits (see write's `dtypes`).
DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BOOL": np.dtype("?"),
          "U8": np.dtype("u1"), "I8": np.dtype("i1"), "I16": np.dtype("<i2"), "U16": np.dtype("<u2"),
          "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "I64": np.dtype("<i8"), "U64": np.dtype("<u8")}


def _kind(dtype):
    for name, known in DTYPES.items():
        if known == dtype.newbyteorder("<"):
            return name
    raise ValueError("no safetensors dtype for %s" % dtype)


def read(path):
    """Returns ({name: array}, metadata)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    metadata = header.pop("__metadata__", {})
    start = 8 + length
    arrays = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = data[start + begin:start + end]
        if info["dtype"] == "BF16":  # the top half of a float32
            a = (np.frombuffer(raw, dtype="<u2").astype("<u4") << 16).view("<f4")
        else:
            a = np.frombuffer(raw, dtype=DTYPES[info["dtype"]])
        arrays[name] = a.reshape(info["shape"])
    return arrays, metadata


def write(path, arrays, metadata=None, dtypes=None):
    """dtypes: {name: safetensors dtype} for arrays whose bytes numpy has no type for
    (BF16 given as its uint16 bits); the others are named after their numpy dtype."""
    dtypes = dtypes or {}
    names = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))  # wider types first: aligned
    header, blobs, offset = {}, [], 0
    for name in names:
        # (not ascontiguousarray: it turns a 0-d array into a 1-d one)
        a = np.asarray(arrays[name], dtype=arrays[name].dtype.newbyteorder("<")).copy(order="C")
        kind = dtypes.get(name) or _kind(a.dtype)
        blob = a.tobytes()
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
