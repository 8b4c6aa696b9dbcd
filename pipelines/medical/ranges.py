"""Adult reference ranges for the common lab panels, in conventional (US) and SI units, the unit of
a result printed without one, and SI values for the common conventional units.

Sources: typical adult serum/plasma/whole-blood ranges in the form the Merck Manual Professional
Version's "Normal Laboratory Values" table gives them (entered by hand, rounded to the usual report
form); where `lexicon.DEFAULT_RANGES` already holds a range for an analyte and unit (the ranges the
bundled samples' reports print, e.g. WBC 4.0–10.0 x10^9/L, platelets 100–300 x10^9/L) that one is
used. Troponin I: the 99th-percentile upper reference limit of conventional assays, 0.04 ng/mL;
BNP: 100 pg/mL (the heart-failure cut-off). They apply only when the report prints no range and no flag of its own.

A result printed without a unit ("creatinine 5.90", "platelet count 139") takes the first unit, in
the note's convention (conventional units for English names, SI for Chinese), whose range the value
plausibly belongs to (between a quarter of the low and twenty times the high limit; for a range
with only an upper limit, between a twentieth and a hundred times it); the result's `unit_inferred`
says so.
"""

from __future__ import annotations

from pipelines.medical.lexicon import DEFAULT_RANGES

# analyte -> [(unit, low, high)], conventional (US) units first, then SI
RANGES: dict[str, list[tuple[str, float, float]]] = {
    # chemistry
    "sodium": [("mEq/L", 135, 145), ("mmol/L", 135, 145)],
    "potassium": [("mEq/L", 3.5, 5.0), ("mmol/L", 3.5, 5.0)],
    "chloride": [("mEq/L", 98, 106), ("mmol/L", 98, 106)],
    "bicarbonate": [("mEq/L", 23, 28), ("mmol/L", 23, 28)],
    "BUN": [("mg/dL", 8, 20), ("mmol/L", 2.9, 7.1)],
    "urea": [("mmol/L", 2.9, 7.1), ("mg/dL", 17, 43)],
    "creatinine": [("mg/dL", 0.6, 1.2), ("umol/L", 53, 106)],
    "glucose": [("mg/dL", 70, 100), ("mmol/L", 3.9, 5.6)],
    "calcium": [("mg/dL", 8.6, 10.2), ("mmol/L", 2.15, 2.55)],
    "magnesium": [("mg/dL", 1.7, 2.2), ("mmol/L", 0.7, 0.9)],
    "phosphate": [("mg/dL", 3.0, 4.5), ("mmol/L", 0.97, 1.45)],
    "albumin": [("g/dL", 3.5, 5.0), ("g/L", 35, 50)],
    "total bilirubin": [("mg/dL", 0.3, 1.2), ("umol/L", 5.1, 20.5)],
    "direct bilirubin": [("mg/dL", 0.1, 0.3), ("umol/L", 1.7, 5.1)],
    "ALT": [("U/L", 0, 35)],
    "AST": [("U/L", 0, 35)],
    "ALP": [("U/L", 36, 150)],
    "amylase": [("U/L", 0, 130)],
    "lipase": [("U/L", 0, 160)],
    "lactate": [("mmol/L", 0.5, 2.2), ("mg/dL", 4.5, 19.8)],
    "total cholesterol": [("mg/dL", 0, 200), ("mmol/L", 0, 5.2)],
    "LDL": [("mg/dL", 0, 130), ("mmol/L", 0, 3.4)],
    "HDL": [("mg/dL", 40, 200), ("mmol/L", 1.0, 5.2)],
    "triglycerides": [("mg/dL", 0, 150), ("mmol/L", 0, 1.7)],
    "HbA1c": [("%", 4.0, 5.6)],
    "TSH": [("mIU/L", 0.5, 5.0), ("uIU/mL", 0.5, 5.0)],
    "CRP": [("mg/L", 0, 10), ("mg/dL", 0, 1.0)],
    "procalcitonin": [("ng/mL", 0, 0.5)],
    "ferritin": [("ng/mL", 24, 336)],
    # blood count
    "WBC": [("K/uL", 4.0, 10.0), ("x10^9/L", 4.0, 10.0)],
    "RBC": [("M/uL", 4.2, 5.9), ("x10^12/L", 4.2, 5.9)],
    "hemoglobin": [("g/dL", 12.0, 17.5), ("g/L", 120, 175)],
    "hematocrit": [("%", 36, 50)],
    "platelets": [("K/uL", 150, 400), ("x10^9/L", 150, 400)],
    "MCV": [("fL", 80, 100)],
    "RDW": [("%", 11.5, 14.5)],
    "neutrophils %": [("%", 40, 75)],
    "lymphocytes %": [("%", 20, 40)],
    # coagulation
    "INR": [("", 0.8, 1.2)],
    "PT": [("s", 11, 13.5)],
    "APTT": [("s", 25, 35)],
    "D-dimer": [("ug/mL", 0, 0.5), ("ng/mL", 0, 500)],
    # cardiac markers
    "troponin": [("ng/mL", 0, 0.04), ("ng/L", 0, 40)],
    "BNP": [("pg/mL", 0, 100), ("ng/L", 0, 100)],
    "ESR": [("mm/h", 0, 20)],
}

# conventional unit -> SI: analyte -> (from unit, SI unit, factor)
TO_SI: dict[str, tuple[str, str, float]] = {
    "creatinine": ("mg/dL", "umol/L", 88.4),
    "glucose": ("mg/dL", "mmol/L", 0.0555),
    "BUN": ("mg/dL", "mmol/L", 0.357),
    "total bilirubin": ("mg/dL", "umol/L", 17.1),
    "direct bilirubin": ("mg/dL", "umol/L", 17.1),
    "calcium": ("mg/dL", "mmol/L", 0.2495),
    "hemoglobin": ("g/dL", "g/L", 10.0),
    "albumin": ("g/dL", "g/L", 10.0),
    "total cholesterol": ("mg/dL", "mmol/L", 0.02586),
    "LDL": ("mg/dL", "mmol/L", 0.02586),
    "HDL": ("mg/dL", "mmol/L", 0.02586),
    "triglycerides": ("mg/dL", "mmol/L", 0.01129),
    "WBC": ("K/uL", "x10^9/L", 1.0),
    "platelets": ("K/uL", "x10^9/L", 1.0),
    "sodium": ("mEq/L", "mmol/L", 1.0),
    "potassium": ("mEq/L", "mmol/L", 1.0),
    "chloride": ("mEq/L", "mmol/L", 1.0),
    "bicarbonate": ("mEq/L", "mmol/L", 1.0),
}


def reference_range(analyte: str, unit: str | None) -> tuple[float, float] | None:
    """The adult range of `analyte` in `unit` (the samples' ranges first, then `RANGES`)."""
    u = unit or ""
    if u in DEFAULT_RANGES.get(analyte, {}):
        return DEFAULT_RANGES[analyte][u]
    for ru, lo, hi in RANGES.get(analyte, []):
        if ru == u:
            return lo, hi
    return None


def infer_unit(analyte: str, value: float, conventional: bool) -> str | None:
    """The unit of a result printed without one, or None when no range of the analyte fits the value."""
    units = RANGES.get(analyte, [])
    if not conventional:
        units = units[1:] + units[:1] if len(units) > 1 else units
    for u, lo, hi in units:
        low, high = (lo / 4, hi * 20) if lo > 0 else (hi / 20, hi * 100)  # upper-limit-only markers run higher
        if low <= value <= high:
            return u
    return None


def to_si(analyte: str, value: float, unit: str | None) -> tuple[float, str] | None:
    """The value in SI units when it is given in the analyte's conventional unit."""
    conv = TO_SI.get(analyte)
    if conv is None or unit != conv[0]:
        return None
    return round(value * conv[2], 4), conv[1]
