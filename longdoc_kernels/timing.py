"""Device time of a short GPU call, for the launch tuners and the probes.

Timing one launch between two CUDA events measures the host's launch overhead as much as the
kernel whenever the kernel is shorter than its launch (tens of microseconds for a Triton launch
from Python): a decode kernel of 30 us then looks like 80 us, and a tuner picks by host noise.
`graph_time` captures `reps` calls into one CUDA graph and times its replays, so what is timed is
what a graph-captured decode step runs. Callers that stream weights or K/V larger than L2 rotate
over several copies inside `fn` themselves if L2 hits would flatter them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch


def graph_time(fn: Callable[[], object], reps: int = 20, replays: int = 5) -> float:
    """Median seconds per call of `fn` over `replays` replays of a graph of `reps` calls."""
    fn()  # compile / warm up outside the capture
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    g = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        fn()  # the first call on a new stream may allocate; keep it out of the graph
        with torch.cuda.graph(g, stream=stream):
            for _ in range(reps):
                fn()
    torch.cuda.current_stream().wait_stream(stream)
    times = []
    for _ in range(replays):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / 1e3 / reps)
    del g
    return statistics.median(times)
