"""Tensor parallelism: one model split over several processes (ranks), Megatron-style.

`LLM(model=..., tensor_parallel_size=W)` starts ranks 1..W-1 itself and keeps the `LLM` API
unchanged; rank 0 (the caller's process) runs the scheduler and broadcasts each step.
- shard.py: which slice of every weight a rank holds (heads, MLP width, vocabulary).
- group.py: the process groups, the collectives, control messages, the consistency check.
- runner.py: rank 0's TPModelRunner, the worker ranks' loop, the launch.
"""
