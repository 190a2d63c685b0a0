#!/usr/bin/python3
"""xgrad's GPT-2 and Llama against the plain PyTorch reference (tests/reference/hf_models.py,
Hugging Face's names and layouts), through Hugging Face directories both ways.

    /usr/bin/python3 tests/model_parity_test.py build/bin/model_parity FOLDER      (ctest: model_parity)

(the files go to a new folder in FOLDER, removed when every case passes)

model_parity is xgrad's side (a test program that tests/CMakeLists.txt builds):
    model_parity init FAMILY CONFIG_JSON SEED DIR
        FAMILY gpt2 | llama; xgrad's own init of the config in CONFIG_JSON (a config.json),
        saved as a Hugging Face directory in float32 in DIR.
    model_parity forward DIR TOKENS OUT
        the directory loaded in float64; TOKENS holds "tokens" and "targets" (I64 [N, T]);
        OUT gets "logits" (F64 [N, T, V]), "loss" (F64 [], the mean cross-entropy) and
        "grad.NAME" (F64, the saved tensor's layout) for every tensor the directory holds.
    Bad input: one line on stderr, exit status 2, nothing written.

Cases, each one line:
  reference -> xgrad  random small configs of both families (tied and untied heads; GQA
      ratios 1, 2, 4; rope_theta 10000, 500000, 1.5; odd vocabularies, widths, MLP widths,
      head widths and lengths; a Llama config without head_dim, and two whose head_dim is
      not hidden_size / heads; scaled RoPE, llama3 and linear, as transformers 4.x and 5.x
      write it; Mistral with sliding windows shorter than the sequence, as long and
      null), each written by the
      reference in float64, float32, float16, bfloat16 and as float64 shards: xgrad's
      logits, loss and every gradient against the reference's on the weights as read back;
  xgrad -> reference  model_parity init writes a directory (float32, the config's fields,
      exactly the reference's tensor names and shapes) that the reference loads, and
      xgrad's forward on it agrees with the reference's;
  bad input  config fields missing, of the wrong type or contradicting the tensors, missing
      and extra tensors, shapes that differ, an index naming a missing shard, an unknown
      model_type, K/V heads not dividing the heads: exit 2, one line naming the file and the
      field, tensor or shard (a shape mismatch: both shapes), no OUT.

Agreement: max |xgrad - reference| <= 1e-10 * max(1, max |reference|) per tensor (absolute
for values of order 1 and below, relative to the tensor's largest value above). Both sides
compute in float64 from the same weights, so the residue is rounding (about 1e-15).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
import hf_models  # noqa: E402
import safetensors_numpy  # noqa: E402

TOLERANCE = 1e-10

passed, failed = 0, 0


def report(ok, what):
    global passed, failed
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    passed, failed = passed + ok, failed + (not ok)


# ---- the configs ------------------------------------------------------------------------


def gpt2_cases(rng):
    """Tied and untied alternating; widths with heads of 8, 4, 3, 5 and 6 columns; MLP
    widths 4C and odd; epsilons that matter."""
    shapes = [(24, 3), (24, 6), (15, 5), (20, 4), (15, 3), (24, 4)]
    inner = [None, 52, 37, None, 52, 45]
    lengths = [9, 7, 1, 9, 5, 8]
    for i, ((C, heads), n_inner, T) in enumerate(zip(shapes, inner, lengths)):
        config = hf_models.gpt2_config(vocab_size=rng.choice([37, 31, 43]), n_positions=T + rng.randint(0, 4),
                                       n_embd=C, n_layer=rng.randint(1, 3), n_head=heads, n_inner=n_inner,
                                       layer_norm_epsilon=[1e-5, 1e-3][i % 2], tie_word_embeddings=(i % 2 == 0))
        yield "gpt2-%d (%s, C %d, %d heads, inner %s, T %d)" % (
            i, "tied" if i % 2 == 0 else "untied", C, heads, n_inner or 4 * C, T), config, T


def llama_cases(rng):
    """Every GQA ratio with every theta, tied and untied heads for each ratio, head widths
    2 to 12, one config written without head_dim (as before transformers 4.45)."""
    heads_by_ratio = {1: [(3, 3, 8), (6, 6, 4), (2, 2, 12)], 2: [(6, 3, 4), (4, 2, 6), (2, 1, 12)],
                      4: [(4, 1, 6), (12, 3, 2), (8, 2, 4)]}  # (heads, kv heads, head_dim)
    lengths = [9, 8, 5, 9, 3, 9, 6, 9, 7]
    for i in range(9):
        ratio, theta, tied = (1, 2, 4)[i % 3], (10000.0, 500000.0, 1.5)[i // 3], i % 2 == 1
        heads, kv, hd = heads_by_ratio[ratio][i // 3]
        config = hf_models.llama_config(vocab_size=rng.choice([37, 31, 43]), hidden_size=heads * hd,
                                        intermediate_size=rng.choice([40, 37, 52]),
                                        num_hidden_layers=rng.randint(1, 3), num_attention_heads=heads,
                                        num_key_value_heads=kv, rope_theta=theta,
                                        rms_norm_eps=[1e-6, 1e-5, 1e-2][i % 3], max_position_embeddings=64,
                                        tie_word_embeddings=tied, write_head_dim=(i != 3))
        yield "llama-%d (%s, C %d, %d heads / %d kv, theta %g, T %d%s)" % (
            i, "tied" if tied else "untied", heads * hd, heads, kv, theta, lengths[i],
            ", no head_dim" if i == 3 else ""), config, lengths[i]
    # Scaled RoPE: Llama 3.1's bands (kept, blended, divided all present at these widths)
    # and linear, as transformers 4.x writes them (rope_scaling, "type" in older files) and
    # as 5.x does (rope_parameters).
    llama3 = lambda original: {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,  # noqa: E731
                               "high_freq_factor": 4.0, "original_max_position_embeddings": original}
    scaled = [("llama3", 2, 1, 12, 10000.0, llama3(512), False, 9),
              ("linear, \"type\"", 4, 2, 8, 500.0, {"type": "linear", "factor": 3.0}, False, 7),
              ("llama3, rope_parameters", 3, 3, 16, 500000.0, llama3(256), True, 8)]
    for i, (what, heads, kv, hd, theta, scaling, v5, T) in enumerate(scaled, start=9):
        config = hf_models.llama_config(vocab_size=rng.choice([37, 31, 43]), hidden_size=heads * hd,
                                        intermediate_size=rng.choice([40, 37, 52]),
                                        num_hidden_layers=rng.randint(1, 2), num_attention_heads=heads,
                                        num_key_value_heads=kv, rope_theta=theta, max_position_embeddings=64,
                                        tie_word_embeddings=(i % 2 == 0), rope_scaling=scaling, transformers5=v5)
        yield "llama-%d (RoPE %s, %d heads / %d kv of %d, theta %g, T %d)" % (i, what, heads, kv, hd, theta, T), \
            config, T
    # head_dim of its own: q_proj wider or narrower than hidden_size, which the heads need not divide.
    for i, (hidden, heads, kv, hd, T) in enumerate([(18, 4, 2, 8, 9), (40, 3, 1, 6, 6)], start=12):
        config = hf_models.llama_config(vocab_size=rng.choice([37, 31, 43]), hidden_size=hidden,
                                        intermediate_size=rng.choice([40, 37, 52]), num_hidden_layers=2,
                                        num_attention_heads=heads, num_key_value_heads=kv, rope_theta=10000.0,
                                        max_position_embeddings=64, tie_word_embeddings=(i % 2 == 1), head_dim=hd)
        yield "llama-%d (C %d, %d heads / %d kv of head_dim %d, T %d)" % (i, hidden, heads, kv, hd, T), config, T


def mistral_cases(rng):
    """Mistral's sliding window shorter than the sequence (3 of 9; 1: each position sees
    itself alone), as long as it (no effect), and null (none), with GQA and a head_dim of
    its own."""
    windows = [(3, 9, 4, 2, 6, None), (1, 6, 2, 1, 8, None), (7, 7, 3, 3, 4, None), (None, 8, 4, 2, 8, 20)]
    for i, (window, T, heads, kv, hd, hidden) in enumerate(windows):
        config = hf_models.mistral_config(window, vocab_size=rng.choice([37, 31, 43]),
                                          hidden_size=hidden or heads * hd, intermediate_size=rng.choice([40, 37]),
                                          num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv,
                                          max_position_embeddings=64, tie_word_embeddings=(i % 2 == 1),
                                          head_dim=hd if hidden else None)
        yield "mistral-%d (sliding window %s, T %d, %d heads / %d kv of %d)" % (i, window, T, heads, kv, hd), config, T


# ---- running xgrad and comparing --------------------------------------------------------


def run(program, *args):
    return subprocess.run([program] + [str(a) for a in args], capture_output=True, text=True, timeout=300)


def write_tokens(path, config, T, rng):
    V = config["vocab_size"]
    tokens = rng.integers(0, V, size=(2, T), dtype=np.int64)
    targets = rng.integers(0, V, size=(2, T), dtype=np.int64)
    tokens[0, 0], targets[-1, -1] = V - 1, 0  # the table's edges
    safetensors_numpy.write(path, {"tokens": tokens, "targets": targets})
    return tokens, targets


def compare(reference, out_path):
    """None if xgrad's file holds the reference's tensors within the tolerance, else why not;
    and the largest scaled difference."""
    logits, loss, grads = reference
    want = {"logits": logits, "loss": np.array(loss)}
    want.update({"grad." + name: g for name, g in grads.items()})
    if not os.path.exists(out_path):
        return "no %s written" % out_path, None
    got, _ = safetensors_numpy.read(out_path)
    if set(got) != set(want):
        return "keys: missing %s, unexpected %s" % (sorted(set(want) - set(got)), sorted(set(got) - set(want))), None
    differences = {}
    for key, expected in want.items():
        if got[key].dtype != np.float64 or got[key].shape != expected.shape:
            return "%s is %s %s, expected float64 %s" % (key, got[key].dtype, got[key].shape, expected.shape), None
        scaled = np.abs(got[key] - expected).max(initial=0.0) / max(1.0, np.abs(expected).max(initial=0.0))
        differences[key] = scaled
    worst_key = max(differences, key=lambda k: np.inf if np.isnan(differences[k]) else differences[k])
    worst = differences[worst_key]
    if not worst <= TOLERANCE:
        return "%s differs by %.3g (scaled) > %g" % (worst_key, worst, TOLERANCE), worst
    return None, worst


def forward_and_compare(program, label, directory, tokens_path, reference, out_path):
    result = run(program, "forward", directory, tokens_path, out_path)
    if result.returncode != 0:
        report(False, "%s: model_parity forward exited %d: %s" % (label, result.returncode, result.stderr.strip()))
        return
    problem, worst = compare(reference, out_path)
    report(problem is None, "%s: %s" % (label, problem or "logits, loss, %d gradients within %.1e (scaled)"
                                        % (len(reference[2]), worst)))


def reference_to_xgrad(program, tmp, label, config, T, seed, rng):
    model = hf_models.build_model(config, seed)
    case_dir = os.path.join(tmp, label.split()[0])
    os.makedirs(case_dir, exist_ok=True)
    tokens_path = os.path.join(case_dir, "tokens.safetensors")
    tokens, targets = write_tokens(tokens_path, config, T, rng)
    total = sum(p.numel() * 8 for p in model.parameters())
    for variant, dtype, shard_bytes in [("float64", "float64", None), ("float32", "float32", None),
                                        ("float16", "float16", None), ("bfloat16", "bfloat16", None),
                                        ("float64 shards", "float64", total // 3)]:
        directory = os.path.join(case_dir, variant.replace(" ", "_"))
        hf_models.save_pretrained(model, config, directory, dtype, shard_bytes)
        reference = hf_models.logits_loss_grads(hf_models.load_pretrained(directory), tokens, targets)
        forward_and_compare(program, "reference -> xgrad %s %s" % (label, variant), directory, tokens_path, reference,
                            directory + ".out.safetensors")


# The fields that make the model (and name it), which xgrad's config.json must keep.
MODEL_FIELDS = {
    "gpt2": ["architectures", "model_type", "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
             "activation_function", "layer_norm_epsilon", "tie_word_embeddings"],
    "llama": ["architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "rope_theta",
              "rope_scaling", "max_position_embeddings", "tie_word_embeddings"],
}
MODEL_FIELDS["mistral"] = MODEL_FIELDS["llama"] + ["sliding_window"]


def effective(config, key):
    """A field's value as transformers reads it: absent or null fields take its defaults;
    RoPE's from whichever of transformers' two ways the file writes it."""
    if key in ("rope_theta", "rope_scaling"):
        return hf_models.rope_settings(config)[key == "rope_scaling"]
    value = config.get(key)
    if value is not None:
        return value
    llama = config.get("model_type") in ("llama", "mistral")
    return {"tie_word_embeddings": not llama,
            "n_inner": 4 * config.get("n_embd", 0),
            "num_key_value_heads": config.get("num_attention_heads"),
            "head_dim": config.get("hidden_size", 0) // max(1, config.get("num_attention_heads", 1))}.get(key)


def saved_file_dtypes(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    kinds = set()
    for file in files:
        with open(os.path.join(directory, file), "rb") as f:
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        kinds |= {entry["dtype"] for name, entry in header.items() if name != "__metadata__"}
    return kinds


def xgrad_to_reference(program, tmp, label, config, T, seed, rng):
    case_dir = os.path.join(tmp, label.split()[0], "by_xgrad")
    shutil.rmtree(case_dir, ignore_errors=True)
    os.makedirs(case_dir)
    config_path = os.path.join(case_dir, "asked.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    directory = os.path.join(case_dir, "model")
    result = run(program, "init", config["model_type"], config_path, seed, directory)
    what = "xgrad -> reference %s" % label
    if result.returncode != 0:
        report(False, "%s: model_parity init exited %d: %s" % (what, result.returncode, result.stderr.strip()))
        return
    with open(os.path.join(directory, "config.json")) as f:
        written = json.load(f)
    differing = [key for key in MODEL_FIELDS[config["model_type"]]
                 if effective(written, key) != effective(config, key)]
    kinds = saved_file_dtypes(directory)
    try:
        model = hf_models.load_pretrained(directory)
    except (ValueError, KeyError) as e:
        report(False, "%s: the reference cannot load xgrad's directory: %s" % (what, e))
        return
    report(not differing and kinds == {"F32"},
           "%s: config.json keeps the config's fields%s, tensors %s (float32), names and shapes the reference's"
           % (what, "".join(" (%s: %r, asked %r)" % (k, effective(written, k), effective(config, k))
                            for k in differing), sorted(kinds)))
    tokens_path = os.path.join(case_dir, "tokens.safetensors")
    tokens, targets = write_tokens(tokens_path, config, T, rng)
    reference = hf_models.logits_loss_grads(model, tokens, targets)
    if not np.abs(reference[0]).max() > 0:
        report(False, "%s: xgrad's init gives all-zero logits: nothing would be compared" % what)
        return
    forward_and_compare(program, what, directory, tokens_path, reference,
                        os.path.join(case_dir, "out.safetensors"))


# ---- bad input --------------------------------------------------------------------------


def shape_pattern(shape):
    """A shape however it is written ([24, 72], (24,72), 24x72), not inside another number."""
    return r"(?<!\d)" + r"\D{1,4}".join(str(n) for n in shape) + r"(?!\d)"


def edit_config(directory, change):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    change(config)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)


def edit_tensors(directory, change, file="model.safetensors"):
    path = os.path.join(directory, file)
    arrays, metadata = safetensors_numpy.read(path)
    arrays = {name: np.array(a) for name, a in arrays.items()}
    change(arrays)
    safetensors_numpy.write(path, arrays, metadata=metadata)


def remove(name):
    return lambda arrays: arrays.pop(name)


def add(name, shape):
    return lambda arrays: arrays.__setitem__(name, np.ones(shape, dtype=np.float32))


def transpose(name):
    return lambda arrays: arrays.__setitem__(name, np.ascontiguousarray(arrays[name].T))


def set_field(key, value):
    return lambda config: config.__setitem__(key, value)


def drop_field(key):
    return lambda config: config.pop(key)


def shard_holding(directory, name):
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        return json.load(f)["weight_map"][name]


def raw_config(old, new):
    """An edit of config.json's text (for what json.dump cannot write)."""
    def edit(directory):
        path = os.path.join(directory, "config.json")
        with open(path) as f:
            text = f.read()
        assert old in text, old
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))
    return edit


def first_shard_but_one(directory):
    with open(os.path.join(directory, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    os.remove(os.path.join(directory, files[1]))
    return files[1]


def bad_input_cases():
    """(label, base, edit(directory) -> extra patterns, patterns the line must hold)."""
    c = lambda change: (lambda d: edit_config(d, change))  # noqa: E731
    t = lambda change: (lambda d: edit_tensors(d, change))  # noqa: E731
    g, l2 = "transformer.h.", "model.layers."
    return [
        ("gpt2 config without n_embd", "gpt2", c(drop_field("n_embd")), ["config.json", "n_embd"]),
        ("gpt2 config without n_layer", "gpt2", c(drop_field("n_layer")), ["config.json", "n_layer"]),
        ("llama config without hidden_size", "llama", c(drop_field("hidden_size")), ["config.json", "hidden_size"]),
        ("llama config without num_hidden_layers", "llama", c(drop_field("num_hidden_layers")),
         ["config.json", "num_hidden_layers"]),
        ("config without model_type", "gpt2", c(drop_field("model_type")), ["config.json", "model_type"]),
        ('gpt2 "n_layer": "two"', "gpt2", c(set_field("n_layer", "two")), ["config.json", "n_layer"]),
        ('gpt2 "n_head": 1.5', "gpt2", c(set_field("n_head", 1.5)), ["config.json", "n_head"]),
        ('gpt2 "layer_norm_epsilon": "small"', "gpt2", c(set_field("layer_norm_epsilon", "small")),
         ["config.json", "layer_norm_epsilon"]),
        ('llama "rope_theta": "high"', "llama", c(set_field("rope_theta", "high")), ["config.json", "rope_theta"]),
        ('llama "num_key_value_heads": [2]', "llama", c(set_field("num_key_value_heads", [2])),
         ["config.json", "num_key_value_heads"]),
        ("llama rope_scaling yarn", "llama", c(set_field("rope_scaling", {"rope_type": "yarn", "factor": 4.0})),
         ["config.json", "yarn"]),
        ("llama rope_parameters.rope_theta beside another rope_theta", "llama",
         c(set_field("rope_parameters", {"rope_theta": 123.0})), ["config.json", "rope_parameters.rope_theta", "123"]),
        ("gpt2 n_embd 24, tensors 32 wide", "gpt2-32", c(set_field("n_embd", 24)),
         [r"(?<!\d)24(?!\d)", r"(?<!\d)32(?!\d)", "config.json|model.safetensors"]),
        ("llama intermediate_size 40, tensors 48 wide", "llama", c(set_field("intermediate_size", 40)),
         [r"(?<!\d)40(?!\d)", r"(?<!\d)48(?!\d)", "config.json|model.safetensors"]),
        ("llama num_hidden_layers 3, tensors of 2", "llama", c(set_field("num_hidden_layers", 3)),
         ["model.safetensors", re.escape(l2 + "2.")]),
        ("gpt2 missing tensor", "gpt2", t(remove(g + "1.mlp.c_fc.bias")),
         ["model.safetensors", re.escape(g + "1.mlp.c_fc.bias")]),
        ("llama missing tensor", "llama", t(remove(l2 + "0.self_attn.v_proj.weight")),
         ["model.safetensors", re.escape(l2 + "0.self_attn.v_proj.weight")]),
        ("llama untied head without lm_head.weight", "llama", t(remove("lm_head.weight")),
         ["model.safetensors", re.escape("lm_head.weight")]),
        ("gpt2 extra tensor", "gpt2", t(add(g + "0.mlp.c_gate.weight", (24, 4))),
         ["model.safetensors", re.escape(g + "0.mlp.c_gate.weight")]),
        ("llama extra tensor", "llama", t(add(l2 + "1.mlp.extra_proj.weight", (3,))),
         ["model.safetensors", re.escape(l2 + "1.mlp.extra_proj.weight")]),
        ("gpt2 c_attn in Linear's layout", "gpt2", t(transpose(g + "0.attn.c_attn.weight")),
         ["model.safetensors", re.escape(g + "0.attn.c_attn.weight"), shape_pattern((72, 24)),
          shape_pattern((24, 72))]),
        ("llama gate_proj transposed", "llama", t(transpose(l2 + "1.mlp.gate_proj.weight")),
         ["model.safetensors", re.escape(l2 + "1.mlp.gate_proj.weight"), shape_pattern((24, 48)),
          shape_pattern((48, 24))]),
        ("llama tensor under two names", "llama",
         t(lambda arrays: arrays.__setitem__("layers.0.mlp.up_proj.weight", arrays[l2 + "0.mlp.up_proj.weight"] * 0)),
         ["model.safetensors", re.escape(l2 + "0.mlp.up_proj.weight"), "twice"]),
        ("llama norm weight in I32", "llama",
         t(lambda arrays: arrays.__setitem__("model.norm.weight", np.ones(24, dtype=np.int32))),
         ["model.safetensors", re.escape("model.norm.weight"), "I32", "floats"]),
        ("gpt2 norm weight in BOOL", "gpt2-shards",
         lambda d: edit_tensors(d, lambda arrays: [arrays.__setitem__(n, np.ones(arrays[n].shape, dtype=bool))
                                                   for n in list(arrays) if n.endswith("ln_f.weight")],
                                file=shard_holding(d, "transformer.ln_f.weight")),
         ["model.safetensors.index.json", "ln_f.weight", "BOOL"]),
        ("llama rope_theta 1e400 (past double)", "llama", raw_config("10000.0", "1e400"),
         ["config.json", "not JSON", "1e400"]),
        ("gpt2 index naming a missing shard", "gpt2-shards", first_shard_but_one, []),
        ("llama index naming a missing shard", "llama-shards", first_shard_but_one, []),
        ('model_type "bert"', "gpt2", c(set_field("model_type", "bert")), ["config.json", "model_type", "bert"]),
        ('model_type "llama3"', "llama", c(set_field("model_type", "llama3")), ["config.json", "model_type", "llama3"]),
        ('mistral "sliding_window": 0', "llama", c(lambda config: config.update(model_type="mistral", sliding_window=0)),
         ["config.json", "sliding_window"]),
        ("6 heads on 4 kv heads", "llama", c(set_field("num_key_value_heads", 4)),
         ["config.json", "num_key_value_heads"]),
        ("4 heads on 3 kv heads", "llama-4", c(set_field("num_key_value_heads", 3)),
         ["config.json", "num_key_value_heads"]),
    ]


def bad_input(program, tmp):
    bases = {
        "gpt2": hf_models.gpt2_config(37, 12, 24, 2, 3, n_inner=52),
        "gpt2-32": hf_models.gpt2_config(37, 12, 32, 1, 4),
        "llama": hf_models.llama_config(37, 24, 48, 2, 6, 2),
        "llama-4": hf_models.llama_config(37, 24, 40, 1, 4, 2),
    }
    base_dirs = {}
    for name, config in bases.items():
        model = hf_models.build_model(config, seed=5)
        base_dirs[name] = os.path.join(tmp, "bad", "base-" + name)
        hf_models.save_pretrained(model, config, base_dirs[name], "float32")
        if name in ("gpt2", "llama"):
            base_dirs[name + "-shards"] = base_dirs[name] + "-shards"
            total = sum(p.numel() * 4 for p in model.parameters())
            hf_models.save_pretrained(model, config, base_dirs[name + "-shards"], "float32", total // 3)
    tokens_path = os.path.join(tmp, "bad", "tokens.safetensors")
    write_tokens(tokens_path, {"vocab_size": 37}, 5, np.random.default_rng(3))
    for i, (label, base, edit, patterns) in enumerate(bad_input_cases()):
        directory = os.path.join(tmp, "bad", "case-%d" % i)
        shutil.copytree(base_dirs[base], directory)
        missing_shard = edit(directory)
        if missing_shard:
            patterns = [re.escape(missing_shard)]
        out = os.path.join(directory, "out.safetensors")
        result = run(program, "forward", directory, tokens_path, out)
        line = result.stderr.strip()
        unmatched = [p for p in patterns if not re.search(p, line)]
        ok = result.returncode == 2 and line and "\n" not in line and not unmatched and not os.path.exists(out)
        report(ok, "bad input, %s: exit %d, %s%s%s" % (
            label, result.returncode, json.dumps(line) if "\n" not in line else "%d lines: %s" % (
                line.count("\n") + 1, json.dumps(line)),
            "; the line lacks %s" % unmatched if unmatched else "",
            "; %s was written" % out if os.path.exists(out) else ""))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: model_parity_test.py MODEL_PARITY FOLDER")
    program = os.path.abspath(sys.argv[1])
    if not os.access(program, os.X_OK):
        sys.exit("model_parity_test.py: %s is not an executable" % program)
    os.makedirs(sys.argv[2], exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="run-", dir=sys.argv[2])  # kept when a case fails, to look at
    torch.set_num_threads(1)
    rng, numbers = random.Random(38), np.random.default_rng(38)
    cases = list(gpt2_cases(rng)) + list(llama_cases(rng)) + list(mistral_cases(rng))
    for seed, (label, config, T) in enumerate(cases):
        reference_to_xgrad(program, tmp, label, config, T, seed, numbers)
        xgrad_to_reference(program, tmp, label, config, T, 100 + seed, numbers)
    bad_input(program, tmp)
    print("%d passed, %d failed" % (passed, failed))
    if failed == 0:
        shutil.rmtree(tmp)
    else:
        print("the files are in %s" % tmp)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
