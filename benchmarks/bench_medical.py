"""Benchmark: one 20-document patient through the medical pipeline on the CPU, without the engine.

    python benchmarks/bench_medical.py [--no-embeddings] [--repeat 3]

The patient: the six documents of tests/fixtures/medical/en-appendectomy (admission, operative,
progress, nursing, lab report, discharge summary) plus fourteen generated daily notes (progress
notes, nursing shift notes with POD n and vitals, lab report tables) — deterministic text in the
same style, about 35,000 characters in all. Reports the wall time of the first run in a fresh process (imports
and embedding-model load included) and of warm runs (model loaded, sentence-embedding cache cleared), and the sizes of the result. The target is
under 30 s for the first run (issue 8).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def generated_notes() -> list[tuple[str, str]]:
    rnd = random.Random(8)
    notes = []
    for day in range(1, 15):
        date = f"2024-03-{5 + day:02d}" if 5 + day <= 31 else None
        pod = day
        temp = 38.6 if pod == 3 else round(36.6 + rnd.random() * 1.0, 1)
        hr = 112 if pod == 3 else rnd.randint(72, 96)
        wbc = round(17.8 - max(0, pod - 3) * 1.4, 1) if pod >= 3 else round(12 + rnd.random(), 1)
        kind = ["PROGRESS NOTE", "NURSING NOTES", "LABORATORY REPORT"][day % 3]
        if kind == "PROGRESS NOTE":
            text = (f"PROGRESS NOTE\nDate: {date} 07:30\n\nSubjective: Post-operative day {pod}. "
                    f"Patient reports {'worsening' if pod == 3 else 'mild'} incisional pain. "
                    f"{'No nausea or vomiting.' if pod % 2 else 'Denies chest pain or shortness of breath.'}\n"
                    f"Objective: T {temp} C, HR {hr}, BP {rnd.randint(110, 135)}/{rnd.randint(65, 85)}, RR 18, SpO2 97%. "
                    f"{'Wound erythema with purulent drainage.' if 3 <= pod <= 5 else 'Wound clean and dry.'}\n"
                    f"Labs: WBC {wbc} x10^9/L, hemoglobin {rnd.randint(118, 132)} g/L, CRP {rnd.randint(20, 140)} mg/L.\n"
                    f"Assessment: {'Postoperative wound infection, improving.' if pod > 3 else 'Recovering after appendectomy.'}\n"
                    f"Plan: Continue vancomycin 1 g IV q12h. Acetaminophen 650 mg PO q6h as needed for pain. "
                    f"If fever recurs, obtain blood cultures.\n")
        elif kind == "NURSING NOTES":
            text = f"NURSING NOTES\nShift date: {date}\n\n"
            for hour in (0, 4, 8, 12, 16, 20):
                t_h = temp if hour == 12 else round(36.5 + rnd.random() * 0.8, 1)
                text += (f"POD {pod}, {hour:02d}:00: T {t_h} ℃, HR {hr + rnd.randint(-6, 6)}, "
                         f"BP {rnd.randint(112, 134)}/{rnd.randint(66, 84)}, RR {rnd.randint(14, 20)}, SpO2 {rnd.randint(95, 99)}%. "
                         f"Pain {rnd.randint(1, 5)}/10 at the incision. "
                         f"{'Febrile, wound erythema and purulent drainage, surgeon notified.' if (pod == 3 and hour == 12) else 'Patient denies fever or chills.'} "
                         f"Dressing {'changed' if hour % 8 == 0 else 'dry and intact'}. Ambulating with assistance. "
                         f"Tolerating {'clear liquids' if pod < 2 else 'a regular diet'}.\n\n")
        else:
            text = (f"LABORATORY REPORT\nCollected: {date} 06:00\n\n"
                    "Test            Result    Unit       Reference    Flag\n"
                    f"WBC             {wbc:<9} x10^9/L    4.0-10.0     {'H' if wbc > 10 else ''}\n"
                    f"Hemoglobin      {rnd.randint(118, 132):<9} g/L        130-175      L\n"
                    f"Platelets       {rnd.randint(180, 320):<9} x10^9/L    100-300\n"
                    f"CRP             {rnd.randint(20, 140):<9} mg/L       0-10         H\n"
                    f"Creatinine      {rnd.randint(60, 95):<9} umol/L     44-133\n"
                    f"Potassium       {round(3.6 + rnd.random(), 1):<9} mmol/L     3.5-5.5\n"
                    f"Sodium          {rnd.randint(134, 143):<9} mmol/L     135-145\n"
                    f"Glucose         {round(5 + rnd.random() * 4, 1):<9} mmol/L     3.9-6.1\n"
                    f"ALT             {rnd.randint(15, 60):<9} U/L        0-40\n"
                    f"AST             {rnd.randint(15, 55):<9} U/L        0-40\n"
                    f"Albumin         {rnd.randint(30, 42):<9} g/L        35-50\n"
                    f"Lactate         {round(0.8 + rnd.random() * 2, 1):<9} mmol/L     0.5-2.2\n"
                    f"Procalcitonin   {round(0.1 + rnd.random() * 2, 2):<9} ng/mL      0-0.5\n")
        if kind == "PROGRESS NOTE":
            text += (f"\nMEDICATIONS: Vancomycin 1 g IV q12h; acetaminophen 650 mg PO q6h as needed; enoxaparin 40 mg SC daily; "
                     f"pantoprazole 40 mg PO daily; lisinopril 10 mg PO daily; metformin 500 mg PO BID.\n\n"
                     f"PHYSICAL EXAMINATION: General: alert, oriented, in no acute distress. Lungs clear to auscultation "
                     f"bilaterally, no wheezing or crackles. Heart regular rate and rhythm, no murmur. Abdomen soft, "
                     f"{'tender around the umbilical port' if 3 <= pod <= 6 else 'appropriately tender'}, no rebound "
                     f"tenderness, bowel sounds present. Extremities without edema. "
                     f"{'Umbilical wound with erythema and induration, small amount of purulent drainage.' if 3 <= pod <= 5 else 'Incisions healing well.'}\n\n"
                     f"HOSPITAL COURSE TO DATE: 45-year-old man admitted on 03/04/2024 with acute appendicitis, "
                     f"status post laparoscopic appendectomy on 03/05/2024 for a perforated appendix. On POD 3 he "
                     f"developed fever to 38.6 with wound erythema and purulent drainage; the wound culture grew MRSA "
                     f"and cefazolin was changed to vancomycin. Blood cultures were negative. No evidence of "
                     f"intra-abdominal abscess on CT. Today is hospital day {pod + 2}.\n")
        else:
            text += ("\nComments: specimen received in good condition. Results reviewed by the laboratory physician. "
                     "Critical values were telephoned to the ward nurse and read back.\n" if kind == "LABORATORY REPORT" else
                     f"\nPOD {pod}, 04:00: Vital signs stable. Voiding without difficulty. Reassessed pain, 2/10 after "
                     "acetaminophen. Wound dressing dry and intact. Patient denies nausea or vomiting. Encouraged "
                     "incentive spirometry and ambulation. Family at bedside, questions answered.\n")
        notes.append((f"day{day:02d}_{kind.split()[0].lower()}.txt", text))
    return notes


def patient() -> list[tuple[str, bytes]]:
    files = [(p.name, p.read_bytes()) for p in sorted((ROOT / "tests" / "fixtures" / "medical" / "en-appendectomy").glob("*.txt"))]
    files += [(n, t.encode("utf-8")) for n, t in generated_notes()]
    return files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-embeddings", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    from pipelines.documents import load_bytes
    from pipelines.medical.pipeline import MedicalPipeline

    files = patient()
    assert len(files) == 20
    pipe = MedicalPipeline(use_embeddings=not args.no_embeddings)
    question = "why was the antibiotic changed?"
    docs = [load_bytes(d, n) for n, d in files]
    result = pipe.run_documents(docs, "bench", question=question)
    cold = time.perf_counter() - t0
    from pipelines.medical import evidence

    warm = []
    for _ in range(args.repeat):
        evidence._CACHE.clear()  # no sentence-embedding cache hits: every run encodes all sentences again
        t = time.perf_counter()
        docs = [load_bytes(d, n) for n, d in files]
        pipe.run_documents(docs, "bench", question=question)
        warm.append(time.perf_counter() - t)
    out = {
        "documents": len(files), "chars": sum(len(d.text) for d in docs), "embeddings": not args.no_embeddings,
        "engine": False, "cold_s": round(cold, 2), "warm_median_s": round(statistics.median(warm), 2),
        "warm_runs_s": [round(w, 2) for w in warm], "entities": len(result.entities), "events": len(result.events),
        "relations": len(result.relations), "conflicts": len(result.conflicts), "evidence": len(result.evidence),
        "python": platform.python_version(), "machine": platform.machine(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
