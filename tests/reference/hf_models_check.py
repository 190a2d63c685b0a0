#!/usr/bin/python3
"""Holds the reference of tests/model_parity_test.py (hf_models.py) to computations written
apart from it, so that parity with it means parity with GPT-2 and Llama:

- logits against the models written out in numpy, loop by loop: GPT-2 from its Conv1D
  tensors as stored, Llama with RoPE as a complex rotation (z_i = x_i + i x_{i+d/2} times
  e^{i p theta^(-2i/d)}) and query head h reading K/V head h // (heads / kv_heads), Mistral
  as Llama whose row t reads only its window's keys;
- gradients against central differences of the loss along a random direction (the tied
  weight included);
- directories: every dtype written and read back to exactly the values numpy and torch
  round them to (bfloat16 from torch's own conversion, and known bit patterns), the
  header laid out as the format says, shards within their size with an index that adds up,
  tied heads saved once.

    /usr/bin/python3 tests/reference/hf_models_check.py     (ctest: hf_reference)
"""
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch

import hf_models

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def causal_softmax_rows(q, k, v, window=None):
    """One head, row by row: row t attends to keys 0..t (with a window, the last `window`
    of them)."""
    out = np.zeros((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        first = 0 if window is None else max(0, t + 1 - window)
        scores = k[first:t + 1] @ q[t] / math.sqrt(q.shape[1])
        weights = np.exp(scores - scores.max())
        out[t] = (weights / weights.sum()) @ v[first:t + 1]
    return out


def gpt2_numpy(sd, config, tokens):
    C, H, eps = config["n_embd"], config["n_head"], config["layer_norm_epsilon"]
    hd = C // H
    N, T = tokens.shape
    x = sd["transformer.wte.weight"][tokens] + sd["transformer.wpe.weight"][np.arange(T)]
    for i in range(config["n_layer"]):
        p = "transformer.h.%d." % i
        qkv = layer_norm(x, sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], eps) @ sd[p + "attn.c_attn.weight"] \
            + sd[p + "attn.c_attn.bias"]
        heads = np.zeros((N, T, C))
        for n in range(N):
            for h in range(H):
                q, k, v = (qkv[n, :, part * C + h * hd:part * C + (h + 1) * hd] for part in range(3))
                heads[n, :, h * hd:(h + 1) * hd] = causal_softmax_rows(q, k, v)
        x = x + heads @ sd[p + "attn.c_proj.weight"] + sd[p + "attn.c_proj.bias"]
        u = layer_norm(x, sd[p + "ln_2.weight"], sd[p + "ln_2.bias"], eps) @ sd[p + "mlp.c_fc.weight"] \
            + sd[p + "mlp.c_fc.bias"]
        u = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        x = x + u @ sd[p + "mlp.c_proj.weight"] + sd[p + "mlp.c_proj.bias"]
    x = layer_norm(x, sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], eps)
    return x @ sd.get("lm_head.weight", sd["transformer.wte.weight"]).T


def rotate_complex(rows, theta):
    """rows [T, d]: row p turned as complex pairs (i, i + d/2) by p * theta^(-2i/d)."""
    T, d = rows.shape
    half = d // 2
    z = rows[:, :half] + 1j * rows[:, half:]
    angles = np.arange(T)[:, None] * theta ** (-2.0 * np.arange(half) / d)[None, :]
    z = z * np.exp(1j * angles)
    return np.concatenate([z.real, z.imag], axis=1)


def llama_numpy(sd, config, tokens):
    H, KV = config["num_attention_heads"], config["num_key_value_heads"]
    hd, eps, theta = config.get("head_dim") or config["hidden_size"] // H, config["rms_norm_eps"], config["rope_theta"]
    window = config.get("sliding_window") if config["model_type"] == "mistral" else None
    N, T = tokens.shape
    x = sd["model.embed_tokens.weight"][tokens]
    for i in range(config["num_hidden_layers"]):
        p = "model.layers.%d." % i
        a = rms_norm(x, sd[p + "input_layernorm.weight"], eps)
        q, k, v = (a @ sd[p + "self_attn.%s_proj.weight" % name].T for name in "qkv")
        heads = np.zeros((N, T, H * hd))
        for n in range(N):
            for h in range(H):
                j = h // (H // KV)  # the K/V head this query head reads
                qh = rotate_complex(q[n, :, h * hd:(h + 1) * hd], theta)
                kh = rotate_complex(k[n, :, j * hd:(j + 1) * hd], theta)
                heads[n, :, h * hd:(h + 1) * hd] = causal_softmax_rows(qh, kh, v[n, :, j * hd:(j + 1) * hd], window)
        x = x + heads @ sd[p + "self_attn.o_proj.weight"].T
        m = rms_norm(x, sd[p + "post_attention_layernorm.weight"], eps)
        gate, up = m @ sd[p + "mlp.gate_proj.weight"].T, m @ sd[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ sd[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, sd["model.norm.weight"], eps)
    return x @ sd.get("lm_head.weight", sd["model.embed_tokens.weight"]).T


CONFIGS = {
    "gpt2 tied": hf_models.gpt2_config(37, 11, 24, 2, 3, n_inner=52, layer_norm_epsilon=1e-3),
    "gpt2 untied": hf_models.gpt2_config(31, 9, 15, 1, 5, tie_word_embeddings=False),
    "llama gqa 2 untied": hf_models.llama_config(37, 24, 40, 2, 6, 3, rope_theta=1.5, rms_norm_eps=1e-2),
    "llama gqa 4 tied": hf_models.llama_config(29, 24, 37, 1, 4, 1, rope_theta=500000.0, tie_word_embeddings=True),
    "llama gqa 1": hf_models.llama_config(43, 24, 40, 1, 3, 3, write_head_dim=False),
    "llama head_dim 8 over 18": hf_models.llama_config(41, 18, 40, 2, 4, 2, head_dim=8),
    "mistral sliding window 3": hf_models.mistral_config(3, vocab_size=37, hidden_size=24, intermediate_size=40,
                                                         num_hidden_layers=2, num_attention_heads=4,
                                                         num_key_value_heads=2),
}
NUMPY_MODELS = {"gpt2": gpt2_numpy, "llama": llama_numpy, "mistral": llama_numpy}


def state_dict(model):
    return {name: p.detach().numpy() for name, p in model.named_parameters()}


def check_logits_and_gradients(label, config, rng):
    model = hf_models.build_model(config, seed=7)
    tokens = rng.integers(0, config["vocab_size"], size=(2, 9))
    targets = rng.integers(0, config["vocab_size"], size=(2, 9))
    logits, loss, grads = hf_models.logits_loss_grads(model, tokens, targets)
    by_hand = NUMPY_MODELS[config["model_type"]](state_dict(model), config, tokens)
    check(np.abs(logits - by_hand).max() <= 1e-12 * max(1.0, np.abs(by_hand).max()),
          "%s: logits equal the model written out in numpy (max |diff| %.1e)" % (label, np.abs(logits - by_hand).max()))
    check(logits.std() > 0.5, "%s: the weights give logits that vary (std %.2f)" % (label, logits.std()))
    if config.get("sliding_window"):  # shorter than the 9 positions: it hides keys
        unwindowed = NUMPY_MODELS["llama"](state_dict(model), dict(config, model_type="llama"), tokens)
        check(np.abs(logits - unwindowed).max() > 1e-3,
              "%s: the window changes the logits (max |diff| %.2f without it)" % (label, np.abs(logits - unwindowed).max()))

    direction = {name: rng.standard_normal(g.shape) for name, g in grads.items()}
    along = sum(float((grads[name] * direction[name]).sum()) for name in grads)
    step = 1e-5

    def loss_at(sign):
        moved = hf_models.empty_model(config)
        with torch.no_grad():
            for name, p in moved.named_parameters():
                p.copy_(dict(model.named_parameters())[name] + sign * step * torch.from_numpy(direction[name]))
        return hf_models.logits_loss_grads(moved, tokens, targets)[1]

    numeric = (loss_at(+1) - loss_at(-1)) / (2 * step)
    check(abs(numeric - along) <= 1e-6 * max(1.0, abs(along)),
          "%s: gradient along a random direction %.10f, central difference %.10f" % (label, along, numeric))
    return model


def header(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return length, json.loads(f.read(length))


def check_bfloat16_bits():
    values = np.array([1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, -2.0, np.inf, np.nan, 3.0e38])
    bits = hf_models.to_bfloat16_bits(values)
    expected = [0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC000, 0x7F80, 0x7FC0, 0x7F62]
    check(list(bits) == expected, "bfloat16 bits round to nearest even: %s" % [hex(b) for b in bits])
    sample = np.random.default_rng(1).standard_normal(10000) * 10.0 ** np.random.default_rng(2).integers(-30, 30, 10000)
    by_torch = torch.from_numpy(sample.astype(np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    check(np.array_equal(hf_models.to_bfloat16_bits(sample), by_torch), "bfloat16 bits equal torch's conversion")


def check_directories(label, model, config, tmp):
    values = {name: p.detach().numpy() for name, p in model.named_parameters()}
    rounded = {
        "float64": lambda a: a,
        "float32": lambda a: a.astype(np.float32).astype(np.float64),
        "float16": lambda a: a.astype(np.float16).astype(np.float64),
        "bfloat16": lambda a: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).double().numpy(),
    }
    file_kinds = {"float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16"}
    head_saved = "lm_head.weight" in values
    check(head_saved != config.get("tie_word_embeddings", config["model_type"] == "gpt2"),
          "%s: lm_head.weight saved exactly when the head is untied" % label)
    for dtype, rounding in rounded.items():
        directory = os.path.join(tmp, label.replace(" ", "_"), dtype)
        hf_models.save_pretrained(model, config, directory, dtype)
        length, head = header(os.path.join(directory, "model.safetensors"))
        meta = head.pop("__metadata__")
        check(length % 8 == 0 and meta == {"format": "pt"} and sorted(head) == sorted(values)
              and all(h["dtype"] == file_kinds[dtype] and h["shape"] == list(values[n].shape) for n, h in head.items()),
              "%s %s: header (length %d, dtypes, shapes, names, metadata)" % (label, dtype, length))
        loaded = state_dict(hf_models.load_pretrained(directory))
        check(all(np.array_equal(loaded[n], rounding(values[n])) for n in values),
              "%s %s: read back as the values rounded to %s" % (label, dtype, dtype))
    total = sum(a.nbytes for a in values.values())
    shard_bytes = total // 3
    directory = os.path.join(tmp, label.replace(" ", "_"), "sharded")
    hf_models.save_pretrained(model, config, directory, "float64", shard_bytes=shard_bytes)
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        index = json.load(f)
    files = sorted(set(index["weight_map"].values()))
    sizes_ok = True
    for file in files:
        _, head = header(os.path.join(directory, file))
        head.pop("__metadata__")
        sizes = [np.prod(h["shape"]) * 8 for h in head.values()]
        sizes_ok &= (sum(sizes) <= shard_bytes or len(sizes) == 1) and all(index["weight_map"][n] == file for n in head)
    check(len(files) >= 3 and files[0] == "model-00001-of-%05d.safetensors" % len(files)
          and index["metadata"]["total_size"] == total and sorted(index["weight_map"]) == sorted(values) and sizes_ok
          and not os.path.exists(os.path.join(directory, "model.safetensors")),
          "%s sharded: %d shards within %d bytes, the index naming each tensor's, total_size %d" %
          (label, len(files), shard_bytes, total))
    loaded = state_dict(hf_models.load_pretrained(directory))
    check(all(np.array_equal(loaded[n], values[n]) for n in values), "%s sharded: read back exactly" % label)


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(38)
    check_bfloat16_bits()
    with tempfile.TemporaryDirectory(prefix="hf-reference-") as tmp:
        for label, config in CONFIGS.items():
            model = check_logits_and_gradients(label, config, rng)
            check_directories(label, model, config, tmp)
    print("%d failed" % len(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
