"""Int8 activations on the CPU without the perplexity cost (issue 18, a probe): fbgemm's dynamic
int8 linear reads the layers' int8 weights at ~2.2x `_weight_int8pack_mm`'s bandwidth, but
quantising the activations per tensor cost +1.7% perplexity (BENCHMARKS.md, "CPU decode on the AMD
EPYC, second session"). Here the q/k/v and gate/up products (inputs: RMS-normed) are smoothed first,
as SmoothQuant does: per input channel j, s_j = amax(act_j)^alpha / amax(W_:,j)^(1 - alpha) from a
calibration prefill (2,048 tokens of one contract), W's columns multiplied by s and the preceding
norm's multiplier divided by it (the same function, exactly, before quantisation), then the int8
quantisation, and those products run through fbgemm (one row at a time: the decode path). Scored:
perplexity of 1,023 tokens of another text (GitHub ToS v2) through one-token decode steps.

    python benchmarks/probe_cpu_w8a8_smooth.py ALPHA MODE
    MODE: smooth_fbgemm | nosmooth_fbgemm | plain_int8 (the engine's int8 path, the reference)
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine.model.quant as Q  # noqa: E402
from engine.config import CacheConfig, EngineConfig, LoadConfig, SchedulerConfig  # noqa: E402
from engine.llm import LLM  # noqa: E402
from engine.model.layers import DecoderLayer  # noqa: E402
from engine.model.quant import quantize_model  # noqa: E402

CALIB = ROOT / "data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v1.txt"
HELD = ROOT / "data/samples/contracts/en-github-tos-2017-10-to-2018-05/v2.txt"


def calibrate(llm: LLM, layers: list) -> dict:
    """Per layer, the per-channel max |input| of q/k/v ("qkv") and gate/up ("gu") over a prefill."""
    amax: dict = {}

    def hook(key):
        def record(mod, inp, out):
            a = out.detach().abs().reshape(-1, out.shape[-1]).amax(0).float()
            amax[key] = torch.maximum(amax[key], a) if key in amax else a
        return record

    hs = []
    for i, layer in enumerate(layers):
        hs.append(layer.input_layernorm.register_forward_hook(hook((i, "qkv"))))
        hs.append(layer.pre_feedforward_layernorm.register_forward_hook(hook((i, "gu"))))
    llm.prompt_logits(llm.encode(CALIB.read_text(encoding="utf-8"))[:2048])
    for h in hs:
        h.remove()
    return amax


def smooth(layers: list, amax: dict, alpha: float) -> None:
    """W's columns x s, the norm feeding W divided by s (float weights, before quantisation)."""
    for i, layer in enumerate(layers):
        for key, norm, w in (("qkv", layer.input_layernorm, layer.self_attn.qkv[0]),
                             ("gu", layer.pre_feedforward_layernorm, layer.mlp.gate_up)):
            s = amax[(i, key)].clamp(min=1e-5) ** alpha / w.abs().amax(0).float().clamp(min=1e-5) ** (1 - alpha)
            w.mul_(s.to(w.dtype)[None, :])  # in place: the projections' slices follow
            norm.prepare()
            norm.multiplier = norm.kernel_weight() / s


def fbgemm_rows(in_features: int):
    """Int8Weight.matmul with one-row products of `in_features` inputs through fbgemm's dynamic
    int8 linear (activations quantised per row), the others as before."""
    torch.backends.quantized.engine = "fbgemm"
    orig = Q.Int8Weight.matmul

    def matmul(self, x):
        if x.dim() == 2 and x.shape[0] == 1 and x.dtype == torch.float32 and self.shape[1] == in_features \
                and self.shape[0] != 262144:  # not the output layer
            if getattr(self, "_packed", None) is None:
                wq = torch._make_per_channel_quantized_tensor(self.q, self.scale.double(),
                                                              torch.zeros(self.shape[0], dtype=torch.long), 0)
                self._packed = torch.ops.quantized.linear_prepack(wq, None)
            return torch.ops.quantized.linear_dynamic(x, self._packed, False)
        return orig(self, x)

    Q.Int8Weight.matmul = matmul


def main() -> None:
    warnings.filterwarnings("ignore")
    alpha, mode = float(sys.argv[1]), sys.argv[2]
    torch.set_num_threads(1)
    llm = LLM(config=EngineConfig(LoadConfig(device="cpu", weights="float"), CacheConfig(memory_budget=2**30),
                                  SchedulerConfig(max_model_len=9216, num_speculative_tokens=0)))
    layers = [m for m in llm.model.modules() if isinstance(m, DecoderLayer)]
    amax = calibrate(llm, layers)
    if mode == "smooth_fbgemm":
        smooth(layers, amax, alpha)
    quantize_model(llm.model)
    if mode != "plain_int8":
        fbgemm_rows(llm.model.config.hidden_size)
    held = llm.encode(HELD.read_text(encoding="utf-8"))[:1024]
    t = time.perf_counter()
    logits = llm.prompt_logits(held, chunk=1)
    lp = torch.log_softmax(logits[:-1].float(), -1).gather(1, torch.tensor(held[1:])[:, None])
    print(mode, alpha, "perplexity", len(held) - 1, round(math.exp(-float(lp.mean())), 4), "in",
          round(time.perf_counter() - t, 1), "s", flush=True)


if __name__ == "__main__":
    main()
