"""Prompt-lookup speculative decoding: draft tokens copied from the sequence itself, verified in
one forward.

A CPU decode step is bound by the bytes of weights it reads (engine/model/quant.py), and at a
short context a forward of four rows costs about 1.4-1.5 times one of a single row (BENCHMARKS.md).
Documents are analysed by quoting them: an answer repeats a clause, a name, a figure caption, a
sentence of a note. So when the last `n` tokens of a greedy sequence occurred earlier in its
prompt or output, the tokens that followed that occurrence are a likely continuation (prompt
lookup decoding, Saxena 2023; vLLM's "ngram" speculator). `NgramProposer.propose` finds the most
recent earlier occurrence of the longest suffix of `n_max`..`n_min` tokens and drafts up to `k` of
its followers (where they run into the sequence's end, the period between the two occurrences
repeats: a loop continues as a loop).

`EngineCore.step` feeds the sequence's uncached token and the drafts as one chunk of k + 1 rows
(`ModelRunner.forward(verify=...)`); row i's argmax is the greedy token after position i. Drafts
are accepted while they equal those argmaxes, and the first argmax that differs (or the one after
the last draft) is emitted too, so a step emits 1..k+1 tokens, each the model's greedy choice given
the tokens before it. K/V written for rejected drafts is dropped (the sequence's cached length goes
back, blocks past it are freed) before the prefix cache indexes or the windows release anything.

The tokens are the greedy tokens the model computes in the verifying forward. On the CPU's int8
path they are exactly plain decoding's: the int8 kernels compute each row independently of the
others, and a chunk of a few rows has its attention computed row by row as a decode step computes
it (engine/attention/backend.py, `few_rows`). With float weights (a BLAS GEMM over several rows)
or on CUDA, where it is off unless asked for, they match up to the rounding of several rows at
once, the caveat of batching requests together. A sequence whose drafts keep failing backs off: after
a draft with nothing accepted it skips the next 1, 2, 4, ... 16 steps' proposals (reset by a hit),
so text that never repeats itself pays for a verify step rarely.

What a verify step costs depends on the machine and the context: after 8K tokens on two threads
four rows cost ~2.4 plain steps (each row's attention over every key is arithmetic of its own),
and with a quarter of the drafts accepted the verify steps lost tokens per second against plain
decoding (BENCHMARKS.md). `DraftGovernor` therefore sets how many drafts a step may verify from
what this engine has measured: the seconds of its decode-only steps by row count, per octave of
context (costs measured at 1K tokens do not price a step at 8K), and how often the i-th draft has
been accepted once the ones before it were; the draft count with the most expected tokens per
second wins (zero where none pays). It measures plain steps first; a row count not
measured twice yet is priced as a plain step, so each count is tried (one step alone may have met
a pause of the machine: a verify once read 315 ms against 59); after `REPROBE` plain steps the
drafts are measured again, as the context grows and the costs move.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.core.sequence import Sequence


@dataclass
class _State:
    index: dict[int, dict[tuple[int, ...], int]] = field(default_factory=dict)  # n -> n-gram -> end
    indexed: int = 0  # n-grams ending before this position are in `index`
    cooldown: int = 0  # steps left without proposals
    backoff: int = 0  # the next cooldown after a miss


@dataclass
class SpecStats:
    steps: int = 0  # verifications (one per sequence and step with drafts)
    drafted: int = 0  # draft tokens proposed
    accepted: int = 0  # of which accepted

    def to_dict(self) -> dict:
        return {"spec_verifications": self.steps, "spec_drafted": self.drafted, "spec_accepted": self.accepted,
                "spec_acceptance": self.accepted / self.drafted if self.drafted else None}


class NgramProposer:
    """Drafts for greedy sequences from their own tokens (see the module docstring). k: the most
    drafts per step; n_max..n_min: the suffix lengths tried, longest first."""

    MAX_BACKOFF = 16

    def __init__(self, k: int, n_max: int = 4, n_min: int = 3) -> None:
        if k < 1 or not 1 <= n_min <= n_max:
            raise ValueError("need k >= 1 and 1 <= n_min <= n_max")
        self.k, self.n_max, self.n_min = k, n_max, n_min
        self.states: dict[int, _State] = {}
        self.stats = SpecStats()

    def forget(self, seq_id: int) -> None:
        self.states.pop(seq_id, None)

    def _state(self, seq: Sequence) -> _State:
        st = self.states.get(seq.seq_id)
        if st is None:
            st = self.states[seq.seq_id] = _State(index={n: {} for n in range(self.n_min, self.n_max + 1)})
        return st

    def propose(self, seq: Sequence, k: int) -> list[int]:
        """Up to min(k, self.k) draft tokens to follow `seq`'s tokens (empty: none found, or the
        sequence is backing off)."""
        k = min(k, self.k)
        st = self._state(seq)
        if k < 1:
            return []
        if st.cooldown > 0:
            st.cooldown -= 1
            return []
        ids = seq.all_ids
        length = len(ids)
        # index every n-gram that ends before the last token (its end has a follower to draft)
        start = max(st.indexed, self.n_min)
        for end in range(start, length):
            for n, table in st.index.items():
                if end >= n:
                    table[tuple(ids[end - n:end])] = end
        st.indexed = max(st.indexed, length)
        for n in range(self.n_max, self.n_min - 1, -1):
            if length < n + 1:
                continue
            end = st.index[n].get(tuple(ids[length - n:]))
            if end is not None and end < length:
                # the followers of the match; past the sequence's end the match's period repeats
                # (a loop, the suffix itself occurring length - end tokens earlier)
                draft: list[int] = []
                for j in range(end, end + k):
                    draft.append(ids[j] if j < length else draft[j - length])
                return draft
        return []

    def record(self, seq: Sequence, drafted: int, accepted: int) -> None:
        """A verification of `drafted` drafts of which `accepted` matched: back off after a miss."""
        st = self._state(seq)
        self.stats.steps += 1
        self.stats.drafted += drafted
        self.stats.accepted += accepted
        if accepted == 0:
            st.backoff = min(self.MAX_BACKOFF, max(1, 2 * st.backoff))
            st.cooldown = st.backoff
        else:
            st.backoff = 0


class DraftGovernor:
    """The draft count per sequence that maximises expected tokens per second (module docstring).

    `observe(rows, seconds, drafted, context)`: a decode-only step of `rows` rows took `seconds`
    with `context` tokens in its longest sequence; a row count's cost in an octave of context is
    the least of its last `WINDOW` steps there, once it has `MIN_SAMPLES` (a shared machine only
    ever adds time). `record(drafted, accepted)`: a verify's outcome; draft i (1-based) counts as
    tried when the ones before it were accepted, accepted when it matched (the counts decaying by
    `DECAY` a verify). `limit(decodes, context)`: for a step of `decodes` sequences each drafting
    k, the k in 0..k_max with the largest (1 + E[accepted | k]) / cost(decodes * (1 + k)), where
    E[accepted | k] = sum over i <= k of the product of the acceptance rates of drafts 1..i."""

    WINDOW = 8
    MIN_SAMPLES = 2
    PRIOR_RATE = 0.5  # acceptance rate of a draft position before any verify (weight PRIOR_WEIGHT)
    PRIOR_WEIGHT = 2.0
    DECAY = 0.97  # weight of the verifies before the newest: about the last 30 count
    REPROBE = 64  # plain steps after which drafts are verified again (the costs move with the context)

    def __init__(self, k_max: int) -> None:
        self.k_max = k_max
        self.seconds: dict[tuple[int, int], deque[float]] = {}  # (context octave, rows) -> last steps
        self.tried = [0.0] * (k_max + 1)  # index i: draft i (1-based); 0 unused
        self.accepted = [0.0] * (k_max + 1)
        self.since_drafts = 0  # decode-only steps since one verified drafts

    @staticmethod
    def octave(context: int) -> int:
        """Steps are priced per octave of context (1,024-2,047 tokens, 2,048-4,095, ...): a
        verify's extra rows cost more the longer the context (each row's attention reads every
        key), 1.4 plain steps for four rows after 1K tokens, 2.4 after 8K (BENCHMARKS.md)."""
        return max(0, int(context)).bit_length()

    def observe(self, rows: int, seconds: float, drafted: bool, context: int = 0) -> None:
        key = (self.octave(context), rows)
        self.seconds.setdefault(key, deque(maxlen=self.WINDOW)).append(seconds)
        self.since_drafts = 0 if drafted else self.since_drafts + 1

    def cost(self, rows: int, context: int = 0) -> float | None:
        """Seconds of a decode-only step of `rows` rows at this context (None: fewer than
        MIN_SAMPLES steps measured: one step alone may have met a pause of the machine, 5x its
        cost)."""
        got = self.seconds.get((self.octave(context), rows))
        return min(got) if got and len(got) >= self.MIN_SAMPLES else None

    def record(self, drafted: int, accepted: int) -> None:
        for i in range(1, self.k_max + 1):  # older verifies count less (the text changes)
            self.tried[i] *= self.DECAY
            self.accepted[i] *= self.DECAY
        for i in range(1, min(drafted, accepted + 1) + 1):
            self.tried[i] += 1
            self.accepted[i] += i <= accepted

    def rate(self, i: int) -> float:
        """Acceptance rate of draft i given drafts 1..i-1 were accepted."""
        return (self.accepted[i] + self.PRIOR_RATE * self.PRIOR_WEIGHT) / (self.tried[i] + self.PRIOR_WEIGHT)

    def limit(self, decodes: int, context: int = 0) -> int:
        """Drafts each of `decodes` sequences (the longest `context` tokens) may verify this step
        (0: decode plainly). A row count not measured yet is priced as a plain step: optimism, so
        each draft count gets measured (the one with the most expected tokens first); priced
        higher, a cheap count might never be tried."""
        if decodes < 1:
            return 0
        base = self.cost(decodes, context)
        if base is None:
            return 0  # plain steps first: what drafts are weighed against
        if self.since_drafts >= self.REPROBE:  # measure the drafts again: the context has grown since
            octave = self.octave(context)
            self.seconds = {key: v for key, v in self.seconds.items() if key[0] != octave or key[1] == decodes}
            self.since_drafts = 0
        best, best_rate = 0, 1.0 / base
        expected, run = 0.0, 1.0
        for k in range(1, self.k_max + 1):
            run *= self.rate(k)
            expected += run
            cost = self.cost(decodes * (1 + k), context)
            rate = (1 + expected) / (base if cost is None else cost)
            if rate > best_rate:
                best, best_rate = k, rate
        return best
