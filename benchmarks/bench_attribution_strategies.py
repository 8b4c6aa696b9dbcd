"""Attribution with each ask_document strategy on the CPU (BENCHMARKS.md, "The LLM layer"):
    python benchmarks/bench_attribution_strategies.py prefix|placement"""
import json
import sys
import time

sys.path.insert(0, '.')
from engine import LLM, SchedulerConfig
from pipelines.documents import Document
from pipelines.llm import ask_document

s = sys.argv[1]
llm = LLM(device="cpu", dtype="float32", max_model_len=8192, scheduler=SchedulerConfig(max_num_seqs=8))
text = open("data/samples/contracts/en-commonpaper-csa-1.0-to-1.1/v1.txt", encoding="utf-8").read()
ids = llm.encode(text, add_special_tokens=False)[:2000]
doc = Document.from_text(llm.decode(ids), doc_id="csa")
qs = ["Which law governs this agreement?", "How long is the notice period?", "Who pays the fees?", "What is the liability cap?"]
t0, c0 = time.perf_counter(), time.process_time()
res = ask_document(llm, doc, qs, max_tokens=8, attribute=True, strategy=s)
print(json.dumps({"strategy": s, "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2),
                  "reuse": res.reuse, "answers": [it.text for it in res.items],
                  "top_spans": [[(a.source.char_start, a.source.char_end) for a in it.spans[:2]] for it in res.items]}))
