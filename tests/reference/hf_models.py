#!/usr/bin/python3
"""GPT-2 and Llama in plain PyTorch, under Hugging Face's parameter names and layouts, and
their directories (config.json + model.safetensors, or shards with an index) written and
read with numpy alone. The reference that xgrad's models are held to
(tests/model_parity_test.py) and the PyTorch side of bench/gpt2_124m.py.

Hugging Face's transformers is not packaged in Debian; Debian's python3-torch (1.13) is.
The models follow transformers' GPT2LMHeadModel and LlamaForCausalLM (read, not copied):

GPT-2  x = wte[tokens] + wpe[positions]; per block
           x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
       with LayerNorms (layer_norm_epsilon), Conv1D projections (weight [in, out],
       y = x @ W + b), q, k, v the three C-wide thirds of c_attn's output, causal
       attention scaled by 1/sqrt(head_dim), mlp = c_proj(gelu_tanh(c_fc(x))); then ln_f and
       lm_head (tied to wte unless tie_word_embeddings is false).
Llama  x = embed_tokens[tokens]; per layer
           x = x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))), n = input_layernorm(x)
           x = x + down_proj(silu(gate_proj(n)) * up_proj(n)), n = post_attention_layernorm(x)
       with RMSNorm (x / sqrt(mean(x^2) + eps) * weight), no biases, RoPE in the rotate-half
       convention, num_key_value_heads K/V heads each read by heads / kv_heads query heads;
       then model.norm and lm_head (tied to embed_tokens only if tie_word_embeddings).
Mistral  Llama's model (MistralForCausalLM) with a sliding window: query i sees keys
       i - sliding_window < j <= i.

Dropout is not modelled (the configs' *_pdrop fields are written 0 and never read): the
reference is the deterministic model that parity needs. Everything runs in the dtype the
model is built in (float64 for the tests); Hugging Face computes inv_freq and RMSNorm in
float32 whatever the model's dtype, which float64 parity deliberately does not copy.
"""
import json
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import safetensors_numpy

# ---- configs: the fields transformers writes in config.json -----------------------------


def gpt2_config(vocab_size, n_positions, n_embd, n_layer, n_head, n_inner=None, layer_norm_epsilon=1e-5,
                tie_word_embeddings=True):
    config = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": vocab_size,
        "n_positions": n_positions, "n_ctx": n_positions, "n_embd": n_embd, "n_layer": n_layer, "n_head": n_head,
        "n_inner": n_inner, "activation_function": "gelu_new", "layer_norm_epsilon": layer_norm_epsilon,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "initializer_range": 0.02,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "summary_type": "cls_index", "summary_use_proj": True, "summary_activation": None,
        "summary_proj_to_labels": True, "summary_first_dropout": 0.0, "use_cache": True,
        "bos_token_id": vocab_size - 1, "eos_token_id": vocab_size - 1,
    }
    if not tie_word_embeddings:  # transformers writes only what differs from its default, true
        config["tie_word_embeddings"] = False
    return config


def llama_config(vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                 num_key_value_heads, rope_theta=10000.0, rms_norm_eps=1e-6, max_position_embeddings=2048,
                 tie_word_embeddings=False, write_head_dim=True, rope_scaling=None, transformers5=False, head_dim=None):
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": hidden_size, "intermediate_size": intermediate_size, "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads, "num_key_value_heads": num_key_value_heads,
        "hidden_act": "silu", "max_position_embeddings": max_position_embeddings, "rms_norm_eps": rms_norm_eps,
        "rope_theta": rope_theta, "rope_scaling": None, "attention_bias": False, "attention_dropout": 0.0,
        "mlp_bias": False, "initializer_range": 0.02, "pretraining_tp": 1, "use_cache": True,
        "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": tie_word_embeddings,
    }
    if write_head_dim:  # configs written before transformers 4.45 have none: hidden / heads
        config["head_dim"] = head_dim or hidden_size // num_attention_heads
    if rope_scaling is not None:
        config["rope_scaling"] = dict(rope_scaling)
    if transformers5:  # 5.x: rope_parameters, theta and scaling in one object
        scaling = config.pop("rope_scaling") or {"rope_type": "default"}
        config["rope_parameters"] = dict(scaling, rope_theta=config.pop("rope_theta"))
    return config


def mistral_config(sliding_window, **llama_fields):
    """MistralConfig as transformers writes it: Llama's fields (no biases, no
    pretraining_tp), model_type "mistral" and a sliding window (None: none)."""
    config = llama_config(**llama_fields)
    for name in ("attention_bias", "mlp_bias", "pretraining_tp"):
        config.pop(name)
    config.update({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": sliding_window})
    return config


def rope_settings(config):
    """(theta, scaling) of a Llama config.json, from transformers 4.x's rope_theta and
    rope_scaling or 5.x's rope_parameters; scaling is a dict naming its rope_type ("type" in
    older files), None for plain RoPE."""
    parameters = config.get("rope_parameters")
    if parameters is not None:
        theta = parameters.get("rope_theta", config.get("rope_theta", 10000.0))
        scaling = {k: v for k, v in parameters.items() if k != "rope_theta"}
    else:
        theta = config.get("rope_theta", 10000.0)
        scaling = dict(config.get("rope_scaling") or {})
    if "rope_type" not in scaling and "type" in scaling:
        scaling["rope_type"] = scaling.pop("type")
    scaling.pop("type", None)
    return theta, (None if scaling.get("rope_type", "default") == "default" else scaling)


def rope_inv_freq(config, head_dim, dtype):
    """Each pair's frequency (transformers' inv_freq), scaled as the config says: "linear"
    divides them all by factor; "llama3" keeps those of wavelength under original / high,
    divides those over original / low by factor and blends those between."""
    theta, scaling = rope_settings(config)
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=dtype) / head_dim)
    if scaling is None:
        return inv_freq
    factor = scaling["factor"]
    if scaling["rope_type"] == "linear":
        return inv_freq / factor
    if scaling["rope_type"] != "llama3":
        raise ValueError("rope_type %r is not modelled" % scaling["rope_type"])
    low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    long_divided = torch.where(wavelength > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * long_divided / factor + smooth * long_divided
    between = ~(wavelength < original / high) & ~(wavelength > original / low)
    return torch.where(between, blended, long_divided)


# ---- GPT-2 -------------------------------------------------------------------------------


class Conv1D(nn.Module):
    """GPT-2's projection: a Linear whose weight is stored [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out))
        self.bias = nn.Parameter(torch.empty(n_out))

    def forward(self, x):
        return x @ self.weight + self.bias


def gelu_new(x):
    """GELU's tanh form (transformers' "gelu_new")."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def causal_attention(q, k, v, window=None):
    """q, k, v [N, heads, T, head_dim]: softmax(q k^T / sqrt(head_dim), causal) v. With a
    window, query i sees keys j with i - window < j <= i (transformers' sliding_window_overlay
    beside its causal mask)."""
    T = q.size(-2)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
    if window is not None:
        hidden |= torch.ones(T, T, dtype=torch.bool).tril(-window)
    return scores.masked_fill(hidden, float("-inf")).softmax(dim=-1) @ v


def split_heads(x, heads):  # [N, T, heads * d] -> [N, heads, T, d]
    N, T, width = x.shape
    return x.view(N, T, heads, width // heads).transpose(1, 2)


def merge_heads(x):  # [N, heads, T, d] -> [N, T, heads * d]
    N, heads, T, d = x.shape
    return x.transpose(1, 2).reshape(N, T, heads * d)


class GPT2Attention(nn.Module):
    def __init__(self, C, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(x.size(-1), dim=-1)
        y = causal_attention(split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads))
        return self.c_proj(merge_heads(y))


class GPT2MLP(nn.Module):
    def __init__(self, C, inner):
        super().__init__()
        self.c_fc = Conv1D(C, inner)
        self.c_proj = Conv1D(inner, C)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        C, eps = config["n_embd"], config["layer_norm_epsilon"]
        self.ln_1 = nn.LayerNorm(C, eps=eps)
        self.attn = GPT2Attention(C, config["n_head"])
        self.ln_2 = nn.LayerNorm(C, eps=eps)
        self.mlp = GPT2MLP(C, config.get("n_inner") or 4 * C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["n_positions"], config["n_embd"])
        self.h = nn.ModuleList(GPT2Block(config) for _ in range(config["n_layer"]))
        self.ln_f = nn.LayerNorm(config["n_embd"], eps=config["layer_norm_epsilon"])

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.size(1)))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        if config.get("tie_word_embeddings", True):
            self.lm_head.weight = self.transformer.wte.weight

    def forward(self, tokens):  # [N, T] -> logits [N, T, V]
        return self.lm_head(self.transformer(tokens))


# ---- Llama -------------------------------------------------------------------------------


class LlamaRMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(T, inv_freq):
    """cos and sin [T, head_dim] of Hugging Face's rotary embedding: position p turns
    columns i and i + head_dim/2 together by the angle p * inv_freq[i]."""
    dtype = inv_freq.dtype
    angles = torch.arange(T, dtype=dtype)[:, None] * inv_freq[None, :]
    emb = torch.cat([angles, angles], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.size(-1) // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):  # x [N, heads, T, head_dim]
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, times):
    """[N, kv_heads, T, d] -> [N, kv_heads * times, T, d]: K/V head j serves query heads
    j * times .. (j + 1) * times - 1."""
    return x.repeat_interleave(times, dim=1)


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        C, bias = config["hidden_size"], config.get("attention_bias", False)
        self.heads = config["num_attention_heads"]
        mistral = config["model_type"] == "mistral"  # MistralConfig: 8 K/V heads when the field is absent
        self.kv_heads = config.get("num_key_value_heads", 8 if mistral else None) or self.heads
        self.head_dim = config.get("head_dim") or C // self.heads
        self.config = config
        self.q_proj = nn.Linear(C, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(C, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(C, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, C, bias=bias)
        # Mistral's window; absent from a mistral config.json, transformers' default 4096
        self.window = config.get("sliding_window", 4096) if mistral else None

    def forward(self, x):
        cos, sin = rope_cos_sin(x.size(1), rope_inv_freq(self.config, self.head_dim, x.dtype))
        q = apply_rope(split_heads(self.q_proj(x), self.heads), cos, sin)
        k = apply_rope(split_heads(self.k_proj(x), self.kv_heads), cos, sin)
        v = split_heads(self.v_proj(x), self.kv_heads)
        group = self.heads // self.kv_heads
        return self.o_proj(merge_heads(causal_attention(q, repeat_kv(k, group), repeat_kv(v, group), self.window)))


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        C, inner, bias = config["hidden_size"], config["intermediate_size"], config.get("mlp_bias", False)
        self.gate_proj = nn.Linear(C, inner, bias=bias)
        self.up_proj = nn.Linear(C, inner, bias=bias)
        self.down_proj = nn.Linear(inner, C, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        C, eps = config["hidden_size"], config.get("rms_norm_eps", 1e-6)
        self.input_layernorm = LlamaRMSNorm(C, eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = LlamaRMSNorm(C, eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList(LlamaDecoderLayer(config) for _ in range(config["num_hidden_layers"]))
        self.norm = LlamaRMSNorm(config["hidden_size"], config.get("rms_norm_eps", 1e-6))

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)
        if config.get("tie_word_embeddings", False):
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, tokens):
        return self.lm_head(self.model(tokens))


# ---- building, saving and loading --------------------------------------------------------

ARCHITECTURES = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM, "mistral": LlamaForCausalLM}


def empty_model(config, dtype=torch.float64):
    if config.get("model_type") not in ARCHITECTURES:
        raise ValueError("unknown model_type %r" % config.get("model_type"))
    return ARCHITECTURES[config["model_type"]](config).to(dtype)


@torch.no_grad()
def randomize(model, seed):
    """Seeded weights of a scale that makes every part matter: projections N(0, 1/fan_in),
    embeddings N(0, 0.5^2), norm weights 1 + 0.1 N(0, 1) and biases 0.1 N(0, 1) (a norm
    whose weight or bias went astray changes the logits). A tied head keeps the embedding's."""
    generator = torch.Generator().manual_seed(seed)

    def normal(p, mean, std):
        p.copy_(mean + std * torch.randn(p.shape, generator=generator, dtype=p.dtype))

    done = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if id(p) in done:
                continue
            done.add(id(p))
            if isinstance(module, nn.Embedding):
                normal(p, 0.0, 0.5)
            elif isinstance(module, (nn.LayerNorm, LlamaRMSNorm)):
                normal(p, 1.0 if name == "weight" else 0.0, 0.1)
            elif name == "bias":
                normal(p, 0.0, 0.1)
            else:  # Linear [out, in], Conv1D [in, out]
                fan_in = p.shape[0] if isinstance(module, Conv1D) else p.shape[1]
                normal(p, 0.0, 1.0 / math.sqrt(fan_in))
    return model


def build_model(config, seed, dtype=torch.float64):
    return randomize(empty_model(config, dtype), seed)


def to_bfloat16_bits(values):
    """float values -> bfloat16 bits (uint16): float32, then its top half rounded to nearest
    even (NaN kept quiet)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)


FILE_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16, "bfloat16": None}


def _file_arrays(model, dtype):
    """{name: (array, safetensors dtype or None)} in the model's order. named_parameters
    gives a tied weight once, under the embedding's name, as transformers saves it."""
    out = {}
    for name, p in model.named_parameters():
        values = p.detach().to(torch.float64).numpy()
        if dtype == "bfloat16":
            out[name] = (to_bfloat16_bits(values), "BF16")
        else:
            out[name] = (values.astype(FILE_DTYPES[dtype]), None)
    return out


def _write_safetensors(path, arrays):
    safetensors_numpy.write(path, {n: a for n, (a, _) in arrays.items()}, metadata={"format": "pt"},
                            dtypes={n: kind for n, (_, kind) in arrays.items() if kind})


def save_pretrained(model, config, directory, dtype="float32", shard_bytes=None):
    """config.json and model.safetensors in `directory` (made if needed); with shard_bytes,
    model-0000i-of-0000n.safetensors files of at most that many tensor bytes each (a larger
    tensor alone in its own) and model.safetensors.index.json, as transformers shards."""
    if dtype not in FILE_DTYPES:
        raise ValueError("dtype is one of %s, not %r" % (sorted(FILE_DTYPES), dtype))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(config, torch_dtype=dtype), f, indent=2)
        f.write("\n")
    arrays = _file_arrays(model, dtype)
    if shard_bytes is None:
        _write_safetensors(os.path.join(directory, "model.safetensors"), arrays)
        return
    shards, size = [{}], 0
    for name, (array, kind) in arrays.items():
        if shards[-1] and size + array.nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = (array, kind)
        size += array.nbytes
    weight_map = {}
    for i, shard in enumerate(shards):
        file = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        _write_safetensors(os.path.join(directory, file), shard)
        weight_map.update({name: file for name in shard})
    index = {"metadata": {"total_size": sum(a.nbytes for a, _ in arrays.values())},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def read_tensors(directory):
    """{name: float64 array} from model.safetensors, or from the shards the index names."""
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            files = [os.path.join(directory, name) for name in sorted(set(json.load(f)["weight_map"].values()))]
    tensors = {}
    for path in files:
        arrays, _ = safetensors_numpy.read(path)
        tensors.update({name: a.astype(np.float64) for name, a in arrays.items()})
    return tensors


def load_pretrained(directory):
    """The model a directory describes, in float64, with exactly the saved tensors."""
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    model = empty_model(config, torch.float64)
    tensors = read_tensors(directory)
    params = dict(model.named_parameters())
    missing, extra = sorted(set(params) - set(tensors)), sorted(set(tensors) - set(params))
    if missing or extra:
        raise ValueError("%s: missing %s, unexpected %s" % (directory, missing, extra))
    with torch.no_grad():
        for name, p in params.items():
            if tuple(p.shape) != tensors[name].shape:
                raise ValueError("%s: %s is %s, the config makes it %s" % (directory, name, tensors[name].shape,
                                                                           tuple(p.shape)))
            p.copy_(torch.from_numpy(tensors[name]))
    return model


def logits_loss_grads(model, tokens, targets):
    """Logits [N, T, V], the mean cross-entropy against targets [N, T] and its gradient for
    every saved tensor (a tied weight's includes the head's part), as numpy float64."""
    model.zero_grad(set_to_none=True)
    logits = model(torch.from_numpy(tokens))
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), torch.from_numpy(targets).reshape(-1))
    loss.backward()
    grads = {name: p.grad.detach().numpy().copy() for name, p in model.named_parameters()}
    return logits.detach().numpy(), loss.item(), grads
