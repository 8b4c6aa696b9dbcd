"""Benchmark: a 50-page research report through the reports pipeline (target: under 20 s on this
machine's CPU).

The report is built from the real PDFs in tests/fixtures/reports/ with pypdfium2: their pages are
concatenated (debuyl 17 + zh-sustechthesis-example 24 + eglen 7 pages, then debuyl again) up to
exactly 50 pages: English and Chinese text, vector plots, ruled and three-line tables, equations,
internal links. Timed end to end: PDF ingest (`load_bytes`: words, reading order, furniture) and
`analyse_document` (layout, captions and objects, tables, structure, mentions, resolution,
pydantic result), and the JSON export; the median of --runs runs is reported, with the split, the
process's CPU time (less sensitive to other jobs on a shared machine) and the load average.

    python benchmarks/bench_reports.py [--runs 3] [--pages 50]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.export import to_json  # noqa: E402
from pipelines.documents import load_bytes  # noqa: E402
from pipelines.reports import analyse_document  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "reports"
ORDER = ["debuyl", "zh-sustechthesis-example", "eglen"]


def build_report(n_pages: int = 50) -> bytes:
    """A PDF of exactly `n_pages` pages taken in turn from the fixture PDFs."""
    import pypdfium2 as pdfium

    out = pdfium.PdfDocument.new()
    sources = [pdfium.PdfDocument(str(FIXTURES / f"{n}.pdf")) for n in ORDER]
    k = 0
    while len(out) < n_pages:
        src = sources[k % len(sources)]
        take = min(len(src), n_pages - len(out))
        out.import_pages(src, list(range(take)))
        k += 1
    buf = io.BytesIO()
    out.save(buf)
    for s in sources:
        s.close()
    out.close()
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pages", type=int, default=50)
    args = ap.parse_args()
    data = build_report(args.pages)
    ingest_s, analyse_s, export_s, total_s, cpu_s = [], [], [], [], []
    result = None
    for _ in range(args.runs):
        c0 = time.process_time()
        t0 = time.perf_counter()
        doc = load_bytes(data, "bench-report.pdf")
        t1 = time.perf_counter()
        result = analyse_document(doc, data)
        t2 = time.perf_counter()
        text = to_json(result)
        t3 = time.perf_counter()
        cpu_s.append(time.process_time() - c0)
        ingest_s.append(t1 - t0)
        analyse_s.append(t2 - t1)
        export_s.append(t3 - t2)
        total_s.append(t3 - t0)
    assert result is not None and result.document.n_pages == args.pages
    report = {
        "pages": args.pages,
        "pdf_bytes": len(data),
        "runs": args.runs,
        "median_total_s": round(statistics.median(total_s), 2),
        "median_ingest_s": round(statistics.median(ingest_s), 2),
        "median_analyse_s": round(statistics.median(analyse_s), 2),
        "median_export_s": round(statistics.median(export_s), 3),
        "max_total_s": round(max(total_s), 2),
        "median_cpu_s": round(statistics.median(cpu_s), 2),  # this process's CPU time: less sensitive to other load
        "load_average_1min": round(os.getloadavg()[0], 2),
        "targets": result.stats["targets"],
        "figures_tables": result.stats["figures_tables"],
        "mentions": result.stats["mentions"],
        "export_chars": len(text),
        "target_s": 20.0,
        "meets_target": statistics.median(total_s) < 20.0,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
    }
    print(json.dumps(report, indent=2))
    return 0 if report["meets_target"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
