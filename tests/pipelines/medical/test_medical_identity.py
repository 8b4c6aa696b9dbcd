"""Patient identity: a folder of several patients is analysed as several patients (the real cases
of issue 19), one patient's documents are not split, and disagreeing identity inside one analysis
is an `identity` conflict pointing at the exact characters."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.documents import Document, load_document
from pipelines.medical.identity import read_identity
from pipelines.medical.pipeline import MedicalPipeline
from pipelines.medical.timex import find_times

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "medical"
SAMPLES = ROOT / "data" / "samples" / "medical"


def _docs(folder: Path) -> list[Document]:
    return [load_document(p) for p in sorted(folder.iterdir()) if p.suffix in (".txt", ".md")
            and not p.name.startswith(("PROVENANCE", "README"))]


def test_cmbclin_notes_are_twenty_patients_not_one_male_54():
    pipe = MedicalPipeline(use_embeddings=False)
    inputs = pipe.discover(FIX / "zh-cmbclin-sample" / "notes")
    assert len(inputs) == 20 and all(len(i.paths) == 1 for i in inputs)
    assert inputs[0].input_id == "notes-case_000" and inputs[0].paths[0].name == "case_000.txt"
    one = pipe.run_input(inputs[1])  # case_001: 女，59岁
    assert (one.patient.sex, one.patient.age) == ("female", "59 years") and not one.conflicts
    # analysed together anyway (run_documents on all of them), the disagreement is a conflict, never silent
    merged = pipe.run_documents(_docs(FIX / "zh-cmbclin-sample" / "notes"))
    kinds = {c.concept for c in merged.conflicts if c.kind == "identity"}
    assert {"patient sex", "patient age"} <= kinds
    assert any("identity" in w for w in merged.warnings)
    sex = next(c for c in merged.conflicts if c.concept == "patient sex")
    assert {s.text for s in sex.sources} == {"男", "女"}


def test_curated_no_truth_five_unrelated_patients_are_not_merged():
    inputs = MedicalPipeline(use_embeddings=False).discover(FIX / "curated-no-truth")
    assert len(inputs) == 5
    assert sorted(p.name for i in inputs for p in i.paths) == sorted(p.name for p in (FIX / "curated-no-truth").iterdir())


def test_one_patient_folders_are_not_split():
    pipe = MedicalPipeline(use_embeddings=False)
    for folder in [*(p / "notes" for p in sorted(FIX.glob("synthea-*"))), SAMPLES / "en-appendectomy",
                   SAMPLES / "zh-cholecystitis", SAMPLES / "synthea-13d7f763", FIX / "en-cholangitis-md"]:
        inputs = pipe.discover(folder)
        assert len(inputs) == 1, (folder, [i.input_id for i in inputs])
        result = pipe.run_input(inputs[0])
        assert not [c for c in result.conflicts if c.kind == "identity"], folder
    result = pipe.run_input(pipe.discover(SAMPLES / "en-appendectomy")[0])
    assert (result.patient.name, result.patient.sex, result.patient.age) == ("john doe", "male", "45 years")


def test_batch_discover_splits_a_mixed_patient_folder(tmp_path):
    root = tmp_path / "medical"
    shutil.copytree(SAMPLES / "en-appendectomy", root / "p1")
    shutil.copy(FIX / "curated-no-truth" / "atrial-fibrillation-consult.txt", root / "p1")
    inputs = MedicalPipeline(use_embeddings=False).discover(root)
    # the five notes without identity evidence join the appendectomy patient, whose stay they fall in
    assert [i.input_id for i in inputs] == ["p1-admission_note", "p1-atrial-fibrillation-consult"]
    assert len(inputs[0].paths) == 6 and [p.name for p in inputs[1].paths] == ["atrial-fibrillation-consult.txt"]


def test_identity_facts_point_at_their_characters():
    doc = load_document(FIX / "curated-no-truth" / "atrial-fibrillation-consult.txt")
    ident = read_identity(doc, find_times(doc))
    assert (ident.sex.value, ident.age.value) == ("female", "74")
    assert ident.age.span.text == "74" and ident.sex.span.text == "woman"
    doc = Document.from_text("Name: Jane Roe  MRN: 00123-A\nAdmission date: 2024-01-02\nDischarge date: 2024-01-09\n"
                             "patient identifies as ...", doc_id="a.txt")
    ident = read_identity(doc, find_times(doc))
    assert (ident.name.value, ident.record.value, ident.admission.value, ident.discharge.value) == (
        "jane roe", "00123-A", "2024-01-02", "2024-01-09")


def test_dated_ages_reconcile_and_overlapping_stays_do_not():
    a = Document.from_text("2019-10-10\nAlex454\n is a 4 month-old male.", doc_id="001_2019-10-10.txt")
    b = Document.from_text("2021-05-17\nAlex454\n is a 1 year-old male.", doc_id="010_2021-05-17.txt")
    pipe = MedicalPipeline(use_embeddings=False)
    assert len(pipe.patients([a, b])) == 1
    c = Document.from_text("Admission date: 2024-03-04\nDischarge date: 2024-03-11\n45-year-old male", doc_id="c.txt")
    d = Document.from_text("Admission date: 2024-03-07\n45-year-old male", doc_id="d.txt")
    groups = pipe.patients([c, d])
    assert len(groups) == 2 and "during the stay" in groups[1].reason
    # same record number: one patient, and the disagreeing sex is a conflict in the result
    e = Document.from_text("MRN: 555123\n45-year-old male with pain", doc_id="e.txt")
    f = Document.from_text("MRN: 555123\nSex: F\nFollow-up visit.", doc_id="f.txt")
    assert len(pipe.patients([e, f])) == 1
    result = pipe.run_documents([e, f])
    c1 = next(c for c in result.conflicts if c.kind == "identity")
    assert c1.concept == "patient sex" and [s.text for s in c1.sources] == ["male", "F"]


def test_a_relative_s_age_is_not_the_patient_s():
    doc = Document.from_text("A 45-year-old man presents with chest pain. His mother, a 70-year-old woman, has diabetes.",
                             doc_id="a.txt")
    ident = read_identity(doc, find_times(doc))
    assert (ident.age.value, ident.sex.value) == ("45", "male")
    doc = Document.from_text("Her 50-year-old son brought her in. She is a 78-year-old woman with anemia.", doc_id="b.txt")
    ident = read_identity(doc, find_times(doc))
    assert (ident.age.value, ident.sex.value) == ("78", "female")
