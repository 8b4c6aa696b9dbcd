"""A pipeline's requests submitted together through the LLM layer against the same requests sent
one by one through `generate` (issue 16's speed floor: >= 5x for 30 change prompts over a
20K-token contract).

    python3 benchmarks/bench_pipeline_batch_gpu.py --out pipeline_batch.json [--models gemma,llama8b]
                                                   [--doc-tokens 20000] [--prompts 30] [--max-tokens 48] [--tiny]

Models: random bf16 weights in real shapes (benchmarks/bench_engine_gpu.py's configs: Gemma 3
270M and the Llama-3-8B shape), saved as an HF folder with a word-level tokenizer over the whole
vocabulary ("w<id>" words), so a text of N words is N tokens and every id decodes. Each model is
loaded with `LLM(model=folder, device=...)` defaults, through `pipelines.llm.get_engine`.

Three ways to serve the same P prompts (instructions + document + "Question: change k ..."):
  batched      ask_document(llm, doc, questions, strategy="placement"): one batch, the document's KV
               computed once and placed (copied) behind the instructions of every request;
  shared       ask_document(..., strategy="prefix"): one batch through `LLM.generate_shared`, the
               [instructions + document] blocks computed once and shared by reference;
  one_by_one   llm.generate(prompt) for each prompt in turn, engine defaults (the prefix cache on:
               the second and later prompts reuse the document's full chunks from it);
  no_reuse     the same one by one with the prefix cache cleared before each prompt (every prompt
               computes the document: what a caller without document reuse pays).
Each is timed after a warm-up pass of the same shapes on another document (compiles, graph
captures and tuning excluded from all three). Reported: seconds, answers and generated tokens per
second, speed-up of batched over each baseline. `--tiny` is a CPU smoke test (toy shapes).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_engine_gpu import hf_configs  # noqa: E402


def now() -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


def write_word_tokenizer(folder: Path, vocab: int) -> None:
    """tokenizer.json: WordLevel over "w<id>" for every id (0 unk, 1 bos, 2 eos), whitespace split."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    words = {"<unk>": 0, "<bos>": 1, "<eos>": 2}
    words.update({f"w{i}": i for i in range(3, vocab)})
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<bos>", "eos_token": "<eos>"}))


def words(rng: random.Random, n: int, vocab: int) -> str:
    return " ".join(f"w{rng.randrange(3, vocab)}" for _ in range(n))


def save_folder(hf_cfg, folder: Path, dev: str) -> None:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    hf_cfg.bos_token_id, hf_cfg.eos_token_id = 1, 2
    with torch.device(dev):
        hf = AutoModelForCausalLM.from_config(hf_cfg, dtype=torch.bfloat16)
    hf.save_pretrained(folder)
    del hf
    gc.collect()
    write_word_tokenizer(folder, hf_cfg.vocab_size)


def serve(llm, doc_text: str, questions: list[str], max_tokens: int, how: str) -> dict:
    from engine import SamplingParams
    from pipelines.documents import Document
    from pipelines.llm import INSTRUCTIONS, QUESTION, STOP, ask_document

    t = now()
    if how in ("batched", "shared"):
        res = ask_document(llm, Document.from_text(doc_text, doc_id="contract"), questions, max_tokens=max_tokens,
                           strategy="placement" if how == "batched" else "prefix")
        gen = sum(len(it.token_ids) for it in res.items)
        errors = sum(it.error is not None for it in res.items)
        extra = {"reuse": res.reuse}
    else:
        params = SamplingParams(max_tokens=max_tokens, stop=list(STOP))
        gen = errors = 0
        for q in questions:
            if how == "no_reuse":
                llm.clear_prefix_cache()
            out = llm.generate(INSTRUCTIONS + doc_text + QUESTION.format(question=q), params)[0]
            gen += len(out.token_ids)
        extra = {}
    dt = now() - t
    return {"seconds": dt, "answers": len(questions), "generated_tokens": gen, "errors": errors,
            "answers_per_s": len(questions) / dt, "gen_tok_per_s": gen / dt, **extra}


def run_model(name: str, cfg, dev: str, doc_tokens: int, prompts: int, max_tokens: int, log) -> dict:
    from pipelines.llm import EngineSettings, forget_engines, get_engine

    res: dict = {"doc_tokens": doc_tokens, "prompts": prompts, "max_tokens": max_tokens}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / name
        save_folder(cfg, folder, dev)
        t0 = time.perf_counter()
        llm = get_engine(EngineSettings(model=str(folder), device=dev, max_num_seqs=max(8, prompts)))
        res["load_s"] = time.perf_counter() - t0
        rng = random.Random(0)
        docs = {k: words(rng, doc_tokens, cfg.vocab_size) for k in ("warm", "timed")}
        qs = [f"change {k} clause {words(rng, 20, cfg.vocab_size)}" for k in range(prompts)]
        for how in ("batched", "shared", "one_by_one", "no_reuse"):
            warm = serve(llm, docs["warm"], qs[:2] if how not in ("batched", "shared") else qs, max_tokens, how)
            log(f"  {name} {how}: warm-up {warm['seconds']:.2f} s")
            llm.clear_prefix_cache()
            r = serve(llm, docs["timed"] + f" w{3 + len(how)}", qs, max_tokens, how)  # a document not seen yet
            res[how] = r
            log(f"  {name} {how}: {r['seconds']:.2f} s for {r['answers']} answers, {r['generated_tokens']} tokens "
                f"({r['gen_tok_per_s']:.0f} tok/s), errors {r['errors']}")
        for way in ("batched", "shared"):
            for base in ("one_by_one", "no_reuse"):
                key = f"speedup_vs_{base}" if way == "batched" else f"shared_speedup_vs_{base}"
                res[key] = res[base]["seconds"] / res[way]["seconds"]
                log(f"  {name} {way} vs {base}: {res[key]:.1f}x")
        res["counters"] = llm.counters().to_dict()
        del llm
        forget_engines()
        gc.collect()
        torch.cuda.empty_cache() if dev == "cuda" else None
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gemma,llama8b")
    ap.add_argument("--out", default="pipeline_batch.json")
    ap.add_argument("--doc-tokens", type=int, default=20000)
    ap.add_argument("--prompts", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    cfgs = hf_configs(args.tiny)
    if args.tiny:
        args.doc_tokens, args.prompts, args.max_tokens = min(args.doc_tokens, 300), min(args.prompts, 4), 4
    out: dict = {"device": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__,
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "models": {}}
    for name in args.models.split(","):
        print(f"== {name}", flush=True)
        out["models"][name] = run_model(name, cfgs[name], dev, args.doc_tokens, args.prompts, args.max_tokens,
                                        lambda m: print(m, flush=True))
        Path(args.out).write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
