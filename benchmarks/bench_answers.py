"""Evidence-first answers scored on the development QA set (benchmarks/eval/qa; issue 45).

    python -m benchmarks.bench_answers collect [--pipelines contracts,medical] [--max-tokens 48]
    python -m benchmarks.bench_answers fit          # fusion weights and threshold from the dev split
    python -m benchmarks.bench_answers score        # both splits with the product's FUSION
    LONGDOC_MODEL=other.gguf python -m benchmarks.bench_answers --features F.json collect  # another model

`collect` runs the product's path for every question with the default engine settings
(`pipelines.llm.get_engine(EngineSettings.from_env())`): the questions of one set of documents
joined as `LLMRun.ask` joins them (`join_documents`), the document's KV computed first (timed
apart: "prefill"), then the model's answers in one batch (`ask_documents`, greedy, the ask
command's instructions and stops) and the attention reads (`evidence.read_attention`), timed
together per question ("seconds per question once the document's KV exists"). Every candidate
passage's features are written to benchmarks/results/answers_features.json, with the model's
text and where the true evidence lies, so that `fit` and `score` need no model.

Scores (per split, per pipeline, per language):
- answer right: an answerable question answered (not "not stated") with shown text that contains
  an accepted answer, or is contained in one and is at least 40% of its length (NFKC, case and all
  whitespace ignored); an unanswerable question abstained;
- evidence top-1 / top-3: the best (three) ranked passages overlap a true evidence quote by at
  least half of the shorter of the two (answerable questions, abstained or not);
- abstention: unanswerable abstained; answerable wrongly abstained;
- wrong and confident: share of all questions answered wrongly with a confidence above the
  median confidence;
- model wording: how often the model's text was shown (supported) and, of those, right.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import unicodedata
from collections import defaultdict
from pathlib import Path

from benchmarks.eval import qa_set

OUT = Path(__file__).resolve().parent / "results" / "answers_features.json"


def _squash(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def answer_right(q, shown: str, status: str) -> bool:
    if not q.answerable:
        return status == "not_stated"
    if status != "answered":
        return False
    s = _squash(shown)
    for a in q.answers:
        t = _squash(a)
        if t and (t in s or (s and s in t and len(s) >= 0.4 * len(t))):
            return True
    return False


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    return inter > 0 and inter >= 0.5 * min(a[1] - a[0], b[1] - b[0])


def is_evidence(text: str, span: tuple[int, int], evidence: list[tuple[int, int]]) -> bool:
    """A passage holds the evidence when it overlaps a true quote by at least half of the shorter,
    or when its text and the quote's are the same passage elsewhere (both versions of a contract
    hold many identical sentences): one contains the other, which is at least half its length
    (NFKC, case and whitespace ignored)."""
    if any(_overlaps(span, e) for e in evidence):
        return True
    p = _squash(text[span[0]:span[1]])
    for a, b in evidence:
        t = _squash(text[a:b])
        short, long_ = sorted((p, t), key=len)
        if short and short in long_ and len(short) >= 0.5 * len(long_):
            return True
    return False


def _joined(paths: tuple[str, ...]):
    """The documents joined as `LLMRun.ask` joins them, and (offset in the joined text, document) of each."""
    from pipelines.llm.run import join_documents

    j = join_documents([qa_set.document(p) for p in paths])
    return j.doc, [(s.start, s.doc) for s in j.segments]


_STRUCTURE: dict[str, object] = {}


def structure_answer(q):
    """The pipeline's structure answer to `q` (contracts: the clause alignment; medical: the
    medication and problem lists; patents: the claim tree; reports: the resolved references), or
    None; cached per question."""
    if q.id not in _STRUCTURE:
        got = None
        if q.pipeline == "medical":
            from pipelines.medical import MedicalPipeline

            docs = [qa_set.document(d) for d in q.docs]
            pipe = MedicalPipeline()
            got = pipe.structure_answerer(pipe.run_documents(docs), docs)(q.question)
        elif q.pipeline == "contracts" and len(q.docs) == 2:
            from pipelines.contracts import ContractsPipeline

            docs = [qa_set.document(d) for d in q.docs]
            pipe = ContractsPipeline()
            got = pipe.structure_answerer(pipe.run_documents(docs), docs)(q.question)
        elif q.pipeline in ("patents", "reports") and len(q.docs) == 1:
            doc = qa_set.document(q.docs[0])
            if q.pipeline == "patents":
                from pipelines.patents import PatentsPipeline

                pipe, result = PatentsPipeline(), PatentsPipeline().run_documents([doc])
            else:
                from pipelines.reports import ReportsPipeline, analyse_document

                path = qa_set.resolve(q.docs[0])
                pipe = ReportsPipeline()
                result = analyse_document(doc, path.read_bytes() if path.suffix.lower() == ".pdf" else None)
            got = pipe.structure_answerer(result, [doc])(q.question)
        _STRUCTURE[q.id] = got
    return _STRUCTURE[q.id]


def _evidence_spans(q, parts) -> list[tuple[int, int]]:
    out = []
    for e in q.evidence:
        for offset, d in parts:
            if d is qa_set.document(e.doc):
                got = qa_set.find_quote(d.text, e.quote)
                if got is not None:
                    out.append((got[0] + offset, got[1] + offset))
    return out


# -------------------------------------------------------------------------------------- collect
def collect(args) -> None:
    from engine import ContextLengthError, SamplingParams
    from pipelines.llm import EngineSettings, get_engine
    from pipelines.llm.evidence import EvidenceJob, gather
    from pipelines.llm.requests import INSTRUCTIONS, QUESTION, STOP, ask_documents, prompt_frame
    from pipelines.llm.run import fallback_policy

    qs = [q for q in qa_set.load(set(args.pipelines.split(",")) if args.pipelines else None)
          if all(qa_set.resolve(d).exists() for d in q.docs)]
    groups: dict[tuple[str, ...], list] = defaultdict(list)
    for q in qs:
        groups[q.docs].append(q)
    t_load = time.perf_counter()
    llm = get_engine(EngineSettings.from_env())
    head, question = prompt_frame(llm, INSTRUCTIONS, QUESTION)  # as LLMRun.ask: a chat model's template
    print(f"engine loaded in {time.perf_counter() - t_load:.1f} s; {len(qs)} questions over {len(groups)} document sets",
          flush=True)
    rows, done, t_all = [], 0, time.perf_counter()
    for n, (paths, group) in enumerate(groups.items(), 1):
        doc, parts = _joined(paths)
        ranges = [(off, off + len(d.text)) for off, d in parts]
        t0 = time.perf_counter()
        try:
            llm.generate_shared(head + doc.text, [question.format(question="?")], SamplingParams(max_tokens=1))
        except ContextLengthError:  # longer than the model's context: its questions go through the fallback
            pass
        prefill_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        res = ask_documents(llm, [(doc, [q.question for q in group])], instructions=head,
                            question_template=question, max_tokens=args.max_tokens, stop=(*STOP, "\n\n"), attribute=False,
                            fallback=fallback_policy("retrieval"))[0]
        gen_s = time.perf_counter() - t1
        texts = [it.text if it.error is None else "" for it in res.items]
        readable = [it.error is None and it.fallback is None for it in res.items]
        suffixes = [question.format(question=q.question) for q in group]
        t2 = time.perf_counter()
        trace: list = []
        gather(llm, [EvidenceJob(doc, head, [q.question for q in group], suffixes, texts, readable, ranges)],
               trace=trace)
        ev_s = time.perf_counter() - t2
        per_q = (gen_s + ev_s) / len(group)
        for (_, _i, ranked), q, txt, it in zip(trace, group, texts, res.items, strict=True):
            rows.append({"id": q.id, "model_text": txt, "error": it.error, "fallback": it.fallback is not None,
                         "evidence": _evidence_spans(q, parts), "seconds": per_q,
                         "passages": [[p.start, p.end, p.feats] for p in sorted(ranked, key=lambda p: p.start)]})
        done += len(group)
        el = time.perf_counter() - t_all
        print(f"[{n}/{len(groups)}] {paths[0].split('/')[-2 if len(paths) > 1 else -1]}: {len(group)} q, "
              f"{len(doc.text):,} chars, prefill {prefill_s:.1f} s, answers {gen_s:.1f} s, evidence {ev_s:.1f} s; "
              f"{done}/{len(qs)} done, about {el / done * (len(qs) - done):.0f} s left", flush=True)
    out = Path(args.features)
    out.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(out.read_text()) if out.exists() and args.pipelines else {"rows": []}
    keep = {r["id"]: r for r in old["rows"]}
    keep.update({r["id"]: r for r in rows})
    out.write_text(json.dumps({"max_tokens": args.max_tokens, "model": EngineSettings.from_env().describe(),
                               "rows": sorted(keep.values(), key=lambda r: r["id"])}, ensure_ascii=False))
    print(f"wrote {out} ({len(keep)} questions)")


def add_likelihood(args) -> None:
    """Add the `upr` and `lift` features to a collected file: the passages pre-ranked by the
    pre-fusion (`--pre`, a fit's JSON over the first features; default the product's), the best
    `RERANK` read by the model (`LLM.score_many`); the seconds it took added to each question's."""
    from pipelines.llm import EngineSettings, get_engine
    from pipelines.llm.evidence import PRE, RERANK, Passage, likelihood_items, rank, set_likelihood

    pre = _fitted(argparse.Namespace(weights=args.pre))[0] if args.pre else PRE
    data = json.loads(Path(args.features).read_text())
    by_id = {q.id: q for q in qa_set.load()}
    llm = get_engine(EngineSettings.from_env())
    groups: dict[tuple[str, ...], list] = defaultdict(list)
    for r in data["rows"]:
        groups[by_id[r["id"]].docs].append(r)
    t_all, done, total = time.perf_counter(), 0, len(data["rows"])
    for paths, rows in groups.items():
        doc, _ = _joined(paths)
        t0 = time.perf_counter()
        plans, items = [], []
        for r in rows:
            ps = [Passage(s, e, {k: v for k, v in f.items() if k not in ("upr", "lift")}) for s, e, f in r["passages"]]
            ranked = rank(ps, pre)
            its = likelihood_items(by_id[r["id"]].question, doc, ranked[:RERANK])
            plans.append((r, ranked, len(items), len(its)))
            items += its
        outs = llm.score_many(items)
        for r, ranked, lo, n in plans:
            set_likelihood(ranked, [sum(o.logprobs) / len(o.logprobs) for o in outs[lo:lo + n]])
            r["passages"] = [[p.start, p.end, p.feats] for p in sorted(ranked, key=lambda p: p.start)]
        dt = time.perf_counter() - t0
        for r in rows:
            r["seconds_upr"] = dt / len(rows)
        done += len(rows)
        el = time.perf_counter() - t_all
        print(f"{done}/{total}: {len(rows)} q, {len(items)} passages read in {dt:.1f} s; about "
              f"{el / done * (total - done):.0f} s left", flush=True)
    Path(args.features).write_text(json.dumps(data, ensure_ascii=False))
    print(f"wrote {args.features}")


def refeature(args) -> None:
    """Recompute the lexical extras (`evidence.lexical_extras`) of a collected file, no model."""
    from pipelines.llm.evidence import lexical_extras

    data = json.loads(Path(args.features).read_text())
    by_id = {q.id: q for q in qa_set.load()}
    for r in data["rows"]:
        q = by_id[r["id"]]
        doc, _ = _joined(q.docs)
        texts = [doc.text[s:e] for s, e, _ in r["passages"]]
        for p, extra in zip(r["passages"], lexical_extras(q.question, texts, [f["bm25"] for _, _, f in r["passages"]]),
                            strict=True):
            p[2].update(extra)
    Path(args.features).write_text(json.dumps(data, ensure_ascii=False))
    print(f"wrote {args.features}")


# ---------------------------------------------------------------------------------------- score
def _load_rows(features: str):
    data = json.loads(Path(features).read_text())
    by_id = {q.id: q for q in qa_set.load()}
    return [(by_id[r["id"]], r) for r in data["rows"] if r["id"] in by_id]


def evaluate(rows, fusion, verbose: bool = False, confidence=None, per_out: list | None = None,
             route: bool = True) -> dict:
    from pipelines.llm.evidence import Passage, decide, rank

    per = []
    for q, r in rows:
        doc, parts = _joined(q.docs)
        sa = structure_answer(q) if route else None
        if sa is not None:  # the pipeline's structure answered: no passage ranking involved
            ev = [tuple(x) for x in r["evidence"]]
            offset = {d.doc_id: off for off, d in parts}  # each version's spans into the joined text
            quoted = [(offset.get(s.doc_id, 0) + s.char_start, offset.get(s.doc_id, 0) + s.char_end)
                      for s in sa.spans]
            right = answer_right(q, sa.text, sa.status)
            per.append({"q": q, "right": right, "top1": bool(quoted and ev) and is_evidence(doc.text, quoted[0], ev),
                        "top3": bool(ev) and any(is_evidence(doc.text, x, ev) for x in quoted[:3]),
                        "conf": sa.confidence, "status": sa.status, "shown": sa.text, "model": "",
                        "shown_model": False, "seconds": 0.0, "feats": {}, "route": "structure"})
            if verbose:
                print(f"{'ok ' if right else 'BAD'} {q.id} [{q.split}] structure: {q.question[:60]!r} -> {sa.text[:80]!r}")
            continue
        ps = [Passage(s, e, dict(f)) for s, e, f in r["passages"]]
        ranked = rank(ps, fusion)
        found = decide(q.question, doc, ranked, r["model_text"], fusion, confidence)
        ev = [tuple(x) for x in r["evidence"]]
        top1 = bool(ranked and ev) and is_evidence(doc.text, (ranked[0].start, ranked[0].end), ev)
        top3 = bool(ev) and any(is_evidence(doc.text, (p.start, p.end), ev) for p in ranked[:3])
        right = answer_right(q, found.text, found.status)
        shown_model = found.status == "answered" and found.support is not None and found.support.supported \
            and found.text == found.model_text
        per.append({"q": q, "right": right, "top1": top1, "top3": top3, "conf": found.confidence,
                    "status": found.status, "shown": found.text, "model": r["model_text"], "shown_model": shown_model,
                    "seconds": r["seconds"], "feats": found.feats, "route": "evidence"})
        if verbose:
            mark = "ok " if right else "BAD"
            print(f"{mark} {q.id} [{q.split}] conf {found.confidence:.2f} top1 {int(top1)} {found.status}: "
                  f"{q.question[:60]!r} -> {found.text[:80]!r} (model {r['model_text'][:50]!r}; want {q.answers[:2]})")
    if per_out is not None:
        per_out.extend(per)
    return summarise(per)


def summarise(per: list[dict]) -> dict:
    def rate(xs):
        xs = list(xs)
        return round(sum(xs) / len(xs), 3) if xs else None

    ans = [p for p in per if p["q"].answerable]
    una = [p for p in per if not p["q"].answerable]
    med = statistics.median(p["conf"] for p in per) if per else 0.0
    shown = [p for p in per if p["shown_model"]]
    return {"n": len(per), "structure_routed": sum(p.get("route") == "structure" for p in per), "answer_right": rate(p["right"] for p in per),
            "answerable_right": rate(p["right"] for p in ans),
            "evidence_top1": rate(p["top1"] for p in ans), "evidence_top3": rate(p["top3"] for p in ans),
            "unanswerable_abstained": rate(p["status"] == "not_stated" for p in una),
            "answerable_abstained": rate(p["status"] == "not_stated" for p in ans),
            "wrong_and_confident": rate((not p["right"]) and p["conf"] > med for p in per),
            "model_text_shown": len(shown), "model_text_shown_right": rate(p["right"] for p in shown),
            "seconds_per_question": round(statistics.mean(p["seconds"] for p in per), 3) if per else None}


def score(args) -> None:
    from pipelines.llm.evidence import CONFIDENCE, FUSION

    rows = _load_rows(args.features)
    fusion, confidence = _fitted(args) if getattr(args, "weights", None) else (FUSION, CONFIDENCE)
    print(f"fusion: {fusion.source}; confidence: {confidence.source}")
    for split in ("dev", "holdout"):
        part = [(q, r) for q, r in rows if q.split == split]
        print(f"\n== {split}: "
              f"{json.dumps(evaluate(part, fusion, args.verbose and split == 'dev', confidence))}")
        for key in sorted({(q.pipeline, q.lang) for q, _ in part}):
            sub = [(q, r) for q, r in part if (q.pipeline, q.lang) == key]
            s = evaluate(sub, fusion, confidence=confidence)
            print(f"   {key[0]:9s} {key[1]} n={s['n']:3d} right {s['answer_right']} top1 {s['evidence_top1']} "
                  f"top3 {s['evidence_top3']} abst(u) {s['unanswerable_abstained']} abst(a) {s['answerable_abstained']}")


# ------------------------------------------------------------------------------------------ fit
def _fitted(args):
    """(Fusion, Confidence) from a fit's JSON (a --pre fit has no confidence: the product's)."""
    from pipelines.llm.evidence import CONFIDENCE, Confidence, Fusion

    d = json.loads(Path(args.weights).read_text())
    fusion = Fusion(d["weights"], d["bias"], d["threshold"], d["source"])
    c = d.get("confidence")
    conf = Confidence(c["weights"], c["bias"], c["threshold"], c["source"]) if c else CONFIDENCE
    return fusion, conf


def _logistic(X, y, w, lam: float):
    """L2-regularised logistic regression by Newton steps (the bias unpenalised): weights, bias."""
    import numpy as np

    Xb = np.hstack([X, np.ones((len(X), 1))])
    beta = np.zeros(Xb.shape[1])
    pen = np.r_[np.ones(Xb.shape[1] - 1), 0.0]
    for _ in range(100):
        p = 1 / (1 + np.exp(-Xb @ beta))
        g = Xb.T @ (w * (p - y)) + lam * pen * beta
        H = (Xb * (w * p * (1 - p))[:, None]).T @ Xb + lam * np.diag(pen)
        step = np.linalg.solve(H, g)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def _listwise(rows, names, lam: float):
    """Weights that maximise, per dev question, the softmax probability of its evidence passages
    among all its passages (L-BFGS, L2), then a bias by one-dimensional Platt scaling of the
    passages' scores, so that sigmoid(bias + score) reads as a probability."""
    import numpy as np
    from scipy.optimize import minimize

    groups = []
    for q, r in rows:
        doc, _ = _joined(q.docs)
        ev = [tuple(x) for x in r["evidence"]]
        X = np.array([[f.get(k, 0.0) for k in names] for _, _, f in r["passages"]])
        y = np.array([float(is_evidence(doc.text, (s, e), ev)) for s, e, _ in r["passages"]])
        if y.sum() > 0:
            groups.append((X, y))

    def loss(wv):
        total, grad = lam * 0.5 * wv @ wv, lam * wv
        for X, y in groups:
            z = X @ wv
            z = z - z.max()
            e = np.exp(z)
            p = e / e.sum()
            pos = (p * y).sum()
            total -= np.log(max(pos, 1e-300))
            # d/dw -log(sum_pos p) = E_p[x] - E_{p|pos}[x]
            grad += X.T @ p - X.T @ (p * y) / max(pos, 1e-300)
        return total, grad

    res = minimize(loss, np.zeros(len(names)), jac=True, method="L-BFGS-B")
    coef = res.x
    scores = np.concatenate([X @ coef for X, _ in groups])
    labels = np.concatenate([y for _, y in groups])
    a, b = _logistic(scores[:, None], labels, np.ones(len(labels)), 1e-6)
    return coef * float(a[0]), b


def fit(args) -> None:
    """Logistic regression (L2, Newton steps) of "this passage holds the evidence" on the dev
    split's passages, then the threshold that maximises dev answer accuracy with answerable
    questions abstained at most 10% of the time."""
    import numpy as np

    from pipelines.llm.evidence import FEATURES, PRE_FEATURES, Fusion

    names = PRE_FEATURES if args.pre else FEATURES
    rows = [(q, r) for q, r in _load_rows(args.features) if q.split == "dev"]
    X, y, w = [], [], []
    for q, r in rows:
        doc, _ = _joined(q.docs)
        ev = [tuple(x) for x in r["evidence"]]
        n = len(r["passages"])
        for s, e, f in r["passages"]:
            label = float(is_evidence(doc.text, (s, e), ev))
            X.append([f.get(k, 0.0) for k in names])
            y.append(label)
            w.append(1.0 / math.sqrt(n))  # long documents do not outweigh short ones
    X, y, w = np.array(X), np.array(y), np.array(w)
    if args.listwise:
        coef, b0 = _listwise(rows, names, args.l2)
    else:
        coef, b0 = _logistic(X, y, w, args.l2)
    weights = {k: round(float(b), 4) for k, b in zip(names, coef, strict=True)}
    bias = round(b0, 4)
    source = (f"fitted on the dev split ({len(rows)} questions, {len(y)} passages, l2 {args.l2}"
              + (", listwise" if args.listwise else "")
              + (", features before the likelihood reading)" if args.pre else ")"))
    out = {"weights": weights, "bias": bias, "threshold": 0.5, "source": source}
    if not args.pre:
        out["confidence"] = _fit_confidence(rows, Fusion(weights, bias, 0.5, source), args.l2)
    print(json.dumps(out, indent=1))
    fusion, conf = Fusion(weights, bias, 0.5, source), None
    if "confidence" in out:
        c = out["confidence"]
        from pipelines.llm.evidence import Confidence

        conf = Confidence(c["weights"], c["bias"], c["threshold"], c["source"])
    print("dev:", json.dumps(evaluate(rows, fusion, confidence=conf)))
    save = Path(args.save or OUT.with_name("answers_pre.json" if args.pre else "answers_fusion.json"))
    save.write_text(json.dumps(out, indent=1))
    print(f"wrote {save}")


def _fit_confidence(rows, fusion, lam: float) -> dict:
    """The confidence model: logistic regression of "the shown answer is right" (an unanswerable
    question's shown answer is never right) on the dev split's answers with nothing abstained, then
    the threshold that maximises dev answer accuracy with answerable questions abstained at most
    10% of the time."""
    import numpy as np

    from pipelines.llm.evidence import CONF_FEATURES, Confidence

    per: list = []
    evaluate(rows, fusion, confidence=Confidence({}, 0.0, 0.0, "all shown"), per_out=per)
    per = [p for p in per if p["route"] == "evidence"]
    X = np.array([[p["feats"].get(k, 0.0) for k in CONF_FEATURES] for p in per])
    y = np.array([float(p["q"].answerable and p["right"]) for p in per])
    coef, b0 = _logistic(X, y, np.ones(len(y)), lam)
    weights = {k: round(float(b), 4) for k, b in zip(CONF_FEATURES, coef, strict=True)}
    best = None
    for th in np.arange(0.0, 0.95, 0.01):
        c = Confidence(weights, round(b0, 4), round(float(th), 2), "fit")
        s = evaluate(rows, fusion, confidence=c)
        ok = (s["answerable_abstained"] or 0.0) <= 0.1
        key = (ok, s["answer_right"], -th)
        if best is None or key > best[0]:
            best = (key, round(float(th), 2))
    return {"weights": weights, "bias": round(b0, 4), "threshold": best[1],
            "source": f"fitted on the dev split ({len(per)} answers, l2 {lam}); threshold: best dev accuracy with "
                      "at most 10% of answerable questions abstained"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", default=str(OUT), help="the collected features file (default: results/answers_features.json)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--pipelines", default="")
    c.add_argument("--max-tokens", type=int, default=48)
    f = sub.add_parser("fit")
    f.add_argument("--l2", type=float, default=1.0)
    f.add_argument("--pre", action="store_true", help="fit the pre-ranking (the features before the likelihood)")
    f.add_argument("--listwise", action="store_true", help="softmax over each question's passages, then Platt scaling")
    f.add_argument("--save", default="", help="default: results/answers_fusion.json (answers_pre.json with --pre)")
    sub.add_parser("refeature")
    u = sub.add_parser("likelihood")
    u.add_argument("--pre", default="", help="a fusion JSON for the pre-ranking (default: the product's FUSION)")
    s = sub.add_parser("score")
    s.add_argument("--weights", default="", help="a fusion JSON written by fit (default: the product's FUSION)")
    s.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    {"collect": collect, "fit": fit, "score": score, "likelihood": add_likelihood,
     "refeature": refeature}[args.cmd](args)


if __name__ == "__main__":
    main()
