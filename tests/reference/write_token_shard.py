#!/usr/bin/python3
"""Writes a token shard as llm.c's dev/data/data_common.py write_datafile does (its two
layouts, "gpt-2" and "llama-3"), with Debian's numpy: run by tests/test_text_shards.cpp,
which reads the shard back through xgrad's reader and loader.

  write_token_shard.py OUT MODEL_DESC COUNT VOCABULARY_SIZE

The tokens are (i * 7919 + 13) % VOCABULARY_SIZE for i in range(COUNT): the test knows
them by the same formula.
"""
import sys

import numpy as np

HEADERS_INFO = {  # llm.c's, as data_common.py has them
    "gpt-2": {"magic": 20240520, "version": 1, "token_dtype": np.uint16},
    "llama-3": {"magic": 20240801, "version": 7, "token_dtype": np.uint32},
}


def write_datafile(filename, toks, model_desc):
    assert len(toks) < 2**31, "token count too large"
    info = HEADERS_INFO[model_desc]
    header = np.zeros(256, dtype=np.int32)  # 256 int32, little-endian on the machines llm.c runs on
    header[0] = info["magic"]
    header[1] = info["version"]
    header[2] = len(toks)
    toks_np = np.array(toks, dtype=info["token_dtype"])
    with open(filename, "wb") as f:
        f.write(header.astype("<i4").tobytes())
        f.write(toks_np.astype(np.dtype(info["token_dtype"]).newbyteorder("<")).tobytes())


out, model_desc, count, vocabulary_size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tokens = (np.arange(count, dtype=np.int64) * 7919 + 13) % vocabulary_size
write_datafile(out, tokens, model_desc)
