#!/usr/bin/python3
"""Writes optim_fixtures.json: 20-step trajectories of torch.optim's SGD, Adam and AdamW
(float64) on a fixed problem, for tests/test_optim.cpp. Run by hand with Debian's
python3-torch, from this folder:

    /usr/bin/python3 make_optim_fixtures.py

Problem: w [3, 4], b [4]; loss = mean((tanh(x @ w + b) - y)^2) with fixed x [5, 3] and
y [5, 4]. Each step: zero_grad, loss, backward, step; the parameters after every step
are recorded. Frozen parameters (a case's "frozen" names) do not require grad.
"""
import json

import torch

torch.manual_seed(99)
torch.set_default_dtype(torch.float64)

x = torch.randn(5, 3)
y = torch.randn(5, 4)
w0 = torch.randn(3, 4)
b0 = torch.randn(4)

CONFIGS = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.001)),
    "adam": ("Adam", dict(lr=0.01, weight_decay=0.01)),
    "adam_amsgrad": ("Adam", dict(lr=0.02, betas=(0.8, 0.95), eps=1e-6, amsgrad=True)),
    "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad": ("AdamW", dict(lr=0.01, amsgrad=True)),
    "sgd_maximize": ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01, maximize=True)),
    "sgd_nesterov_maximize": ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
    "adam_maximize": ("Adam", dict(lr=0.01, weight_decay=0.01, maximize=True)),
    "adamw_maximize": ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
}
# Parameter groups: per group "params" (names) and its own options; the rest as above.
GROUPS = {
    "adamw_two_groups": ("AdamW", dict(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05),
                         [{"params": ["w"], "weight_decay": 0.1}, {"params": ["b"], "weight_decay": 0.0, "lr": 0.02}]),
    "sgd_two_groups": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01),
                       [{"params": ["b"], "lr": 0.05}, {"params": ["w"], "weight_decay": 0.0}]),
    # Groups differing in every other setting.
    "sgd_groups_momentum_nesterov": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
                                     [{"params": ["w"], "momentum": 0.5, "dampening": 0.0, "nesterov": True},
                                      {"params": ["b"], "momentum": 0.0, "maximize": True}]),
    "sgd_groups_dampening": ("SGD", dict(lr=0.05),
                             [{"params": ["w"], "momentum": 0.9, "dampening": 0.5},
                              {"params": ["b"], "momentum": 0.7, "nesterov": True, "weight_decay": 0.1}]),
    "adam_groups_betas_eps_amsgrad": ("Adam", dict(lr=0.01, weight_decay=0.01),
                                      [{"params": ["w"], "betas": (0.8, 0.95), "amsgrad": True},
                                       {"params": ["b"], "eps": 1e-3, "lr": 0.05, "maximize": True}]),
    "adamw_groups_betas_eps_amsgrad": ("AdamW", dict(lr=0.01, betas=(0.85, 0.99), eps=1e-6, amsgrad=True),
                                       [{"params": ["w"], "amsgrad": False, "eps": 1e-4},
                                        {"params": ["b"], "betas": (0.5, 0.9), "weight_decay": 0.0}]),
}
# Frozen parameters: kept in the optimizer, requires_grad False, never updated.
FROZEN = {
    "sgd_frozen_b": ("SGD", dict(lr=0.1, momentum=0.9), None, ["b"]),
    "adamw_frozen_w": ("AdamW", dict(lr=0.01, weight_decay=0.1), [{"params": ["w"]}, {"params": ["b"], "lr": 0.02}],
                       ["w"]),
}


def pack(t):
    return t.detach().reshape(-1).tolist()


def run(kind, options, groups=None, frozen=()):
    """20 steps of torch.optim.<kind> from w0, b0; groups name their tensors ("w", "b")."""
    tensors = {"w": w0.clone().requires_grad_(True), "b": b0.clone().requires_grad_(True)}
    for name in frozen:
        tensors[name].requires_grad_(False)
    w, b = tensors["w"], tensors["b"]
    params = [w, b] if groups is None else [
        dict({k: v for k, v in g.items() if k != "params"}, params=[tensors[n] for n in g["params"]])
        for g in groups]
    opt = getattr(torch.optim, kind)(params, **options)
    trajectory = []
    for _ in range(20):
        opt.zero_grad()
        loss = torch.mean((torch.tanh(x @ w + b) - y) ** 2)
        loss.backward()
        opt.step()
        trajectory.append({"loss": loss.item(), "w": pack(w), "b": pack(b)})
    case = {"optimizer": kind, "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()},
            "trajectory": trajectory}
    if groups is not None:
        case["groups"] = groups
    if frozen:
        case["frozen"] = list(frozen)
    return case


cases = {name: run(kind, options) for name, (kind, options) in CONFIGS.items()}
cases.update({name: run(kind, options, groups) for name, (kind, options, groups) in GROUPS.items()})
cases.update({name: run(kind, options, groups, frozen) for name, (kind, options, groups, frozen) in FROZEN.items()})

with open("optim_fixtures.json", "w") as f:
    json.dump({"torch_version": torch.__version__,
               "problem": {"x": pack(x), "y": pack(y), "w0": pack(w0), "b0": pack(b0)},
               "cases": cases}, f, indent=1)
print("wrote optim_fixtures.json with", len(cases), "cases, torch", torch.__version__)
