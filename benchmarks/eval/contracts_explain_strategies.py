"""contracts.explain: short per-change prompts against both versions placed once as one document.

    OMP_NUM_THREADS=1 python -m benchmarks.eval.contracts_explain_strategies [PAIR_DIR] [--n 6] [--only changes|placement]

For the first `n` material changes of a pair (default: the GitHub ToS pair of the development
corpus), the explanations are generated two ways with the default model:
- "changes" (what the step does): one prompt per change holding its title, old and new words
  around each changed op, the changed words and the direction hint, all in one `generate` batch;
- "placement": version A and version B as one `Document` ("Version A (old): … Version B (new): …")
  computed once by `ask_document(strategy="placement")`, each change a short suffix (its title,
  changed words and hint) after it.
Printed per strategy: seconds (model load excluded), prompt tokens, generated tokens, and the
grounding figures the step uses (mean `support`, explanations kept, answers naming the new value
of the hint).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pipelines.contracts import compare_texts
from pipelines.contracts.llm_steps import (
    EXPLAIN_HEAD,
    StepSettings,
    _entry,
    _sentence,
    change_view,
    echoes,
    explain_prompt,
    support,
)
from pipelines.documents import Document
from pipelines.llm import EngineSettings, ask_document, get_engine

ROOT = Path(__file__).resolve().parents[2]
TOS = ROOT.parent / "shared" / "corpus" / "contracts" / "en-github-tos-2017-10-to-2018-05"
PLACED_INSTRUCTIONS = ("Below are the old version (A) and the new version (B) of a contract. After them, a changed "
                       "clause is named; say in one sentence what changed and in which direction.\n\n")


def _quality(views, texts) -> dict:
    sup = [support(t, v) for v, t in zip(views, texts, strict=True)]
    kept = [bool(t) and s >= StepSettings().min_support and not echoes(t) for t, s in zip(texts, sup, strict=True)]
    news = [v.hint.split("→", 1)[1].split(":")[0].strip() for v in views if v.hint and "→" in v.hint]
    named = sum(1 for v, t in zip(views, texts, strict=True) if v.hint and "→" in v.hint
                and v.hint.split("→", 1)[1].split(":")[0].strip() in t)
    return {"mean_support": round(sum(sup) / len(sup), 3), "kept": sum(kept), "of": len(texts),
            "names_new_value": named, "with_new_value": len(news)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pair", type=Path, nargs="?", default=TOS)
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--only", choices=["changes", "placement"])
    args = ap.parse_args()
    a, b = (args.pair / "v1.txt").read_text(encoding="utf-8"), (args.pair / "v2.txt").read_text(encoding="utf-8")
    res = compare_texts(a, b)
    picked = [k for k, it in enumerate(res.summary) if it.material][:args.n]
    views = [change_view(res, k) for k in picked]
    t0 = time.perf_counter()
    llm = get_engine(EngineSettings())
    print(json.dumps({"model_load_s": round(time.perf_counter() - t0, 1), "changes": len(views)}))
    from engine import SamplingParams

    params = SamplingParams(max_tokens=StepSettings().max_tokens, stop=["\n"])
    if args.only in (None, "changes"):
        prompts = [explain_prompt(v) for v in views]
        t0 = time.perf_counter()
        outs = llm.generate(prompts, params)
        secs = time.perf_counter() - t0
        texts = [_sentence(o.text) for o in outs]
        print(json.dumps({"strategy": "changes", "seconds": round(secs, 1),
                          "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
                          "generated_tokens": sum(len(o.token_ids) for o in outs), **_quality(views, texts),
                          "texts": texts}, ensure_ascii=False))
    if args.only in (None, "placement"):
        doc = Document.from_text(f"Version A (old):\n{a}\n\nVersion B (new):\n{b}", doc_id="a+b")
        # the same entry as the step's prompt minus the old/new text (the document holds it), after the
        # step's own instructions and examples
        questions = ["\n".join(line for line in _entry(v).splitlines() if not line.startswith(("Old:", "New:")))
                     for v in views]
        t0 = time.perf_counter()
        out = ask_document(llm, doc, questions, instructions=PLACED_INSTRUCTIONS,
                           question_template="\n\n" + EXPLAIN_HEAD + "{question}\nWhat changed:",
                           max_tokens=StepSettings().max_tokens, stop=("\n",), strategy="placement")
        secs = time.perf_counter() - t0
        texts = [_sentence(it.text) for it in out.items]
        print(json.dumps({"strategy": "placement", "seconds": round(secs, 1), "status": out.status,
                          "prompt_tokens": sum(int(it.metrics.get("prompt_tokens", 0)) for it in out.items),
                          "generated_tokens": sum(len(it.token_ids) for it in out.items), "reuse": out.reuse,
                          "errors": [it.error for it in out.items if it.error], **_quality(views, texts),
                          "texts": texts}, ensure_ascii=False))


if __name__ == "__main__":
    main()
