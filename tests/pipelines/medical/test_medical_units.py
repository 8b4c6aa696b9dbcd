"""Unit checks of the rule components on sentences written for these tests: time formats and
their normalisation, ConText assertions in English and Chinese, lab and vital parsing, sections."""

from __future__ import annotations

from datetime import date

import pytest

from pipelines.documents import Document
from pipelines.medical.entities import extract
from pipelines.medical.labs import find_labs, find_vitals
from pipelines.medical.sections import find_sections
from pipelines.medical.timex import find_times, normalize

DOC = date(2024, 3, 8)
ANCHORS = {"admission": date(2024, 3, 4), "surgery": date(2024, 3, 5)}


@pytest.mark.parametrize("text,start,gran,anchor", [
    ("2024-03-05", "2024-03-05", "day", "absolute"),
    ("2024/3/5", "2024-03-05", "day", "absolute"),
    ("03/05/2024", "2024-03-05", "day", "absolute"),
    ("25/03/2024", "2024-03-25", "day", "absolute"),  # day first when the first number cannot be a month
    ("06/14/07", "2007-06-14", "day", "absolute"),
    ("5 Mar 2024", "2024-03-05", "day", "absolute"),
    ("March 5, 2024", "2024-03-05", "day", "absolute"),
    ("Mar 5", "2024-03-05", "day", "document"),
    ("March 2024", "2024-03", "month", "absolute"),
    ("2024年3月5日", "2024-03-05", "day", "absolute"),
    ("3月5日 14:30", "2024-03-05T14:30", "minute", "document"),
    ("3月6日8时30分", "2024-03-06T08:30", "minute", "document"),
    ("2024-03-05 14:30", "2024-03-05T14:30", "minute", "absolute"),
    ("POD 3", "2024-03-08", "day", "surgery"),
    ("POD#2", "2024-03-07", "day", "surgery"),
    ("post-operative day 3", "2024-03-08", "day", "surgery"),
    ("postoperative day #1", "2024-03-06", "day", "surgery"),
    ("术后第3天", "2024-03-08", "day", "surgery"),
    ("术后第三天", "2024-03-08", "day", "surgery"),
    ("hospital day 2", "2024-03-05", "day", "admission"),
    ("入院第2天", "2024-03-05", "day", "admission"),
    ("3 days prior to admission", "2024-03-01", "day", "admission"),
    ("two days before admission", "2024-03-02", "day", "admission"),
    ("入院前3天", "2024-03-01", "day", "admission"),
    ("on admission", "2024-03-04", "day", "admission"),
    ("yesterday", "2024-03-07", "day", "document"),
    ("昨日", "2024-03-07", "day", "document"),
    ("前天", "2024-03-06", "day", "document"),
    ("3 days ago", "2024-03-05", "day", "document"),
    ("3天前", "2024-03-05", "day", "document"),
    ("2周前", "2024-02-23", "week", "document"),
])
def test_time_formats(text, start, gran, anchor):
    times = find_times(Document.from_text(f"Seen {text} by the team."))
    assert len(times) == 1 and times[0].text == text, [t.text for t in times]
    tv = normalize(times[0], DOC, ANCHORS)
    assert (tv.start, tv.granularity, tv.anchored_to) == (start, gran, anchor)


def test_durations_and_non_times():
    got = {t.text: t for t in find_times(Document.from_text("Cough for 2 weeks, 腹痛2周来, 发热3小时. Vancomycin every 12 hours. 餐后2小时血糖."))}
    assert set(got) == {"for 2 weeks", "2周来", "3小时"}
    tv = normalize(got["for 2 weeks"], DOC, ANCHORS)
    assert (tv.start, tv.end, tv.anchored_to) == ("2024-02-23", "2024-03-09", "document")
    assert normalize(got["2周来"], DOC, ANCHORS).start == "2024-02-23"


def test_unanchorable_times_stay_marked():
    t = find_times(Document.from_text("POD 3: febrile."))[0]
    tv = normalize(t, DOC, {})
    assert (tv.start, tv.anchored_to) == (None, "unanchored")
    t = find_times(Document.from_text("昨日发热"))[0]
    assert normalize(t, None, {}).anchored_to == "unanchored"


@pytest.mark.parametrize("sentence,term,expected", [
    ("Patient denies chest pain or shortness of breath.", "chest pain", "negated"),
    ("Patient denies chest pain or shortness of breath.", "shortness of breath", "negated"),
    ("No fever.", "fever", "negated"),
    ("Cough but no fever.", "Cough", "present"),
    ("Cough but no fever.", "fever", "negated"),
    ("Pneumonia was ruled out.", "Pneumonia", "negated"),
    ("Cannot rule out pneumonia.", "pneumonia", "possible"),
    ("Findings concerning for appendicitis.", "appendicitis", "possible"),
    ("History of myocardial infarction.", "myocardial infarction", "historical"),
    ("Mother has diabetes.", "diabetes", "family"),
    ("Return to the ED if fever develops.", "fever", "hypothetical"),
    ("No increase in pain.", "pain", "present"),
    ("He is afebrile.", "afebrile", "negated"),
    ("否认高血压病史。", "高血压", "negated"),
    ("未见胆囊结石。", "胆囊结石", "negated"),
    ("无发热、恶心、呕吐。", "呕吐", "negated"),
    ("无明显诱因出现腹痛。", "腹痛", "present"),
    ("考虑急性阑尾炎。", "急性阑尾炎", "possible"),
    ("肺炎待排。", "肺炎", "possible"),
    ("既往糖尿病10年。", "糖尿病", "historical"),
    ("母亲患高血压。", "高血压", "family"),
    ("如出现发热及时就诊。", "发热", "hypothetical"),
    ("腹痛，无发热。", "腹痛", "present"),
])
def test_assertions(sentence, term, expected):
    ms = [m for m in extract(Document.from_text(sentence), find_sections(Document.from_text(sentence))) if m.text == term]
    assert ms, [m.text for m in extract(Document.from_text(sentence), find_sections(Document.from_text(sentence)))]
    assert ms[0].assertion == expected


def test_lab_results_inline_and_tables():
    labs = find_labs(Document.from_text("WBC 15.2 x10^9/L ↑, 血红蛋白 98 g/L, K 3.1 mmol/L (3.5-5.5), 白细胞14.33X109/L"))
    got = [(m.analyte, m.value, m.unit, m.flag, m.flag_source) for m in labs]
    assert got == [("WBC", "15.2", "x10^9/L", "high", "report"), ("hemoglobin", "98", "g/L", "low", "default_range"),
                   ("potassium", "3.1", "mmol/L", "low", "reference_range"), ("WBC", "14.33", "x10^9/L", "high", "default_range")]
    table = "| Test | Result | Unit | Range | Flag |\n|---|---|---|---|---|\n| Platelets | 95 | x10^9/L | 100-300 | L |\n"
    rows = find_labs(Document.from_text(table))
    assert [(m.analyte, m.value, m.ref_low, m.flag) for m in rows] == [("platelets", "95", 100.0, "low")]
    assert table[rows[0].span.start:rows[0].span.end].startswith("Platelets")


def test_vital_signs():
    vs = find_vitals(Document.from_text("T 38.6 ℃, HR 112, BP 90/60 mmHg, RR 24, SpO2 93%. 体温：37.2℃，脉搏88次/分，血压120/80mmHg。Temp 101.5 F"))
    got = [(v.analyte, v.value, v.flag) for v in vs]
    assert ("temperature", "38.6", "high") in got and ("pulse", "112", "high") in got
    assert ("blood_pressure", "90/60", "normal") in got and ("spo2", "93", None) in got
    assert ("temperature", "37.2", "normal") in got and ("pulse", "88", "normal") in got
    f = next(v for v in vs if v.value == "101.5")
    assert f.extra["celsius"] == 38.6 and f.flag == "high"


def test_sections_en_zh():
    en = "CHIEF COMPLAINT: cough.\n\nPast Medical History:\nHTN\n\n# Assessment and Plan\nPneumonia.\n"
    assert [s.key for s in find_sections(Document.from_text(en))] == ["chief_complaint", "past_history", "assessment_plan"]
    zh = "主诉：咳嗽3天。\n现病史：患者3天前受凉后出现咳嗽。\n既往史：体健。\n体格检查\nT 36.8℃\n辅助检查\n（1）实验室检查\nWBC 12×10^9/L\n出院诊断：社区获得性肺炎\n"
    secs = find_sections(Document.from_text(zh))
    assert [s.key for s in secs] == ["chief_complaint", "hpi", "past_history", "exam", "labs", "labs", "discharge_diagnosis"]
    assert zh[secs[0].body_start:secs[0].body_end] == "咳嗽3天。"


def test_medication_details():
    ms = [m for m in extract(Document.from_text("Started ceftriaxone 2 g IV daily and metoprolol 25 mg PO BID."), []) if m.type == "medication"]
    got = [(m.normalized["drug"], m.normalized.get("dose"), m.normalized.get("route"), m.normalized.get("frequency")) for m in ms]
    assert got == [("ceftriaxone", "2", "intravenous", "daily"), ("metoprolol", "25", "oral", "twice daily")]
