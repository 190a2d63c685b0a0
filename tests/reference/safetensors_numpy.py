#!/usr/bin/python3
"""Reading and writing safetensors files with nothing but numpy (the format is simple:
an 8-byte little-endian header length, a JSON header, raw little-endian data)."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.dtype("<f4"), "F64": np.dtype("<f8")}


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
        arrays[name] = np.frombuffer(data[start + begin:start + end], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return arrays, metadata


def write(path, arrays, metadata=None):
    names = sorted(arrays, key=lambda n: (-arrays[n].dtype.itemsize, n))  # wider types first: aligned
    header, blobs, offset = {}, [], 0
    for name in names:
        # (not ascontiguousarray: it turns a 0-d array into a 1-d one)
        a = np.asarray(arrays[name], dtype=arrays[name].dtype.newbyteorder("<")).copy(order="C")
        kind = {4: "F32", 8: "F64"}[a.dtype.itemsize]
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
