"""How far two gloo ranks' logits are from one process's (CPU, float32): the workload and configs of
tests/engine/parallel/test_tensor_parallel.py (tiny Llama and Gemma 3, prefix cache, swap
preemption), with the INT8 warm tier off and on. Prints per case: same tokens, max |logit diff|,
max |logit|, preemptions of each engine, prefix hits.

Usage: python benchmarks/probe_tp_logits.py"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import SamplingParams  # noqa: E402
from tests.engine.parallel.test_tensor_parallel import PRESSURE, config, run  # noqa: E402
from tests.engine.tiny_models import tiny_hf_model  # noqa: E402


def main() -> None:
    for fam in ("llama", "gemma3"):
        folder = tempfile.mkdtemp()
        tiny_hf_model(fam, seed=3).save_pretrained(folder, safe_serialization=True)
        share, n = PRESSURE[fam]
        params = SamplingParams(max_tokens=n, ignore_eos=True)
        for warm in (None, 4):
            one = run(config(folder, 1, share=share, warm_blocks=warm), params)
            two = run(config(folder, 2, share=share, warm_blocks=warm), params)
            print(f"{fam} warm_blocks={warm}: same tokens {one[0] == two[0]}, max |diff| "
                  f"{(one[1] - two[1]).abs().max().item():.2e}, max |logit| {one[1].abs().max().item():.2f}, "
                  f"preemptions {one[2].preemptions}/{two[2].preemptions}, prefix hits {one[2].prefix_hits}", flush=True)


if __name__ == "__main__":
    main()
