"""Synthetic version pairs with known truth, made by altering a real contract in known ways.

Used to measure the alignment threshold (`contracts_calibrate`), by the contracts benchmark and by the tests. Operations, applied to
numbered leaf clauses of version A (a seeded RNG picks them; clauses never overlap between ops):
- `delete`: the clause is removed;
- `insert`: a clause from another document is inserted as the new last child of a section,
  numbered as the next sibling (so nothing else is renumbered);
- `edit`: a share of the clause's words is replaced by words from elsewhere in the document;
- `reword`: sentences swapped, common legal words replaced by synonyms, some words dropped;
- `move`: the clause is cut and pasted elsewhere, keeping its number;
- `reuse`: the clause keeps its number but its text is replaced by a clause from another document
  (truth: the old clause removed, the new one added).
The truth is written in the corpus format (`units_v1`, `units_v2`, `alignment`), so
`contracts_evaluate.score` applies unchanged.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from pipelines.contracts.structure import Clause, parse_structure
from pipelines.documents import Document
from pipelines.text.script import is_han

SYNONYMS = {
    "shall": "will", "will": "shall", "agreement": "contract", "terminate": "end", "provide": "supply",
    "within": "inside", "reasonable": "fair", "notify": "inform", "promptly": "quickly", "obligations": "duties",
    "including": "such as", "party": "side", "receive": "get", "information": "data", "use": "utilise",
    "any": "every", "all": "every", "applicable": "relevant", "prior": "previous", "written": "signed",
    "request": "demand", "responsible": "liable", "ensure": "make sure", "comply": "conform",
}


@dataclass
class Synthetic:
    a: str
    b: str
    truth: dict
    ops: list[tuple[str, str]]  # (operation, anchor in A)


def _units(clauses: list[Clause]) -> list[dict]:
    return [{"id": f"u{k}", "start": c.start, "end": c.end} for k, c in enumerate(clauses)]


def make_pair(text: str, foreign: list[str], seed: int, n_each: int = 2,
              ops: tuple[str, ...] = ("delete", "insert", "edit", "reword", "move"), edit_share: float = 0.25) -> Synthetic:
    """Alter `text` with `n_each` of every operation in `ops`; `foreign` supplies inserted clauses."""
    rng = random.Random(seed)
    st = parse_structure(Document.from_text(text))
    clauses = st.clauses
    zh = st.language == "zh"
    leaves = [k for k, c in enumerate(clauses)
              if c.kind in {"numbered", "paragraph"} and c.end - c.start > 60
              and (k + 1 >= len(clauses) or clauses[k + 1].parent != c.anchor)]
    rng.shuffle(leaves)
    plan: dict[int, str] = {}
    used: list[tuple[str, str]] = []
    for op in ops:
        for _ in range(n_each):
            if op == "insert" and not zh:  # only where a next sibling number can be written
                fit = [k for k in leaves if _next_label(clauses[k], clauses, zh)]
                if not fit:
                    continue
                k = fit[-1]
                leaves.remove(k)
            elif op == "reuse":  # only a clause with its own number label
                fit = [k for k in leaves if clauses[k].label_start == clauses[k].start]
                if not fit:
                    continue
                k = fit[-1]
                leaves.remove(k)
            elif leaves:
                k = leaves.pop()
            else:
                break
            plan[k] = op
            used.append((op, clauses[k].anchor))
    words = re.findall(r"[A-Za-z]{4,}", text) if not zh else list(re.sub(r"\s", "", text))
    moved: list[int] = [k for k, op in plan.items() if op == "move"]
    move_to = {k: rng.randrange(len(clauses)) for k in moved}

    pieces: list[tuple[int | None, str]] = []  # (A index or None for inserted, text)
    for k, c in enumerate(clauses):
        op = plan.get(k)
        seg = text[c.start:c.end]
        if op == "delete" or op == "move":
            pass
        elif op == "edit":
            pieces.append((k, _edit(seg, c, rng, words, edit_share, zh)))
        elif op == "reword":
            pieces.append((k, _reword(seg, c, rng, zh)))
        elif op == "reuse":
            pieces.append((None, text[c.start:c.label_end] + ("" if zh else " ") + rng.choice(foreign)))
        else:
            pieces.append((k, seg))
        if op == "insert":
            f = rng.choice(foreign)
            pieces.append((None, _next_label(c, clauses, zh) + f))
        for m, dest in move_to.items():
            if dest == k and m != k:
                pieces.append((m, text[clauses[m].start:clauses[m].end]))
    sep = "\n\n"
    b = sep.join(t for _, t in pieces) + "\n"
    a_index = {}
    pos = 0
    b_units = []
    for n, (k, t) in enumerate(pieces):
        b_units.append({"id": f"w{n}", "start": pos, "end": pos + len(t)})
        if k is not None:
            a_index.setdefault(k, n)
        pos += len(t) + len(sep)
    rows = []
    for k, _c in enumerate(clauses):
        op = plan.get(k)
        if k in a_index:
            status = "changed" if op in {"edit", "reword"} else "unchanged"
            rows.append({"status": status, "old_id": f"u{k}", "new_id": f"w{a_index[k]}", "renumbered": False,
                         "moved": op == "move", "kind": op})
        else:
            rows.append({"status": "removed", "old_id": f"u{k}", "new_id": None, "renumbered": False})
    for n, (k, _t) in enumerate(pieces):
        if k is None:
            rows.append({"status": "added", "old_id": None, "new_id": f"w{n}", "renumbered": False})
    truth = {"units_v1": _units(clauses), "units_v2": b_units, "alignment": rows}
    # version A in the same layout (clauses separated by blank lines) so that offsets agree
    a = sep.join(text[c.start:c.end] for c in clauses) + "\n"
    pos = 0
    for u, c in zip(truth["units_v1"], clauses, strict=True):
        u["start"], u["end"] = pos, pos + c.end - c.start
        pos += c.end - c.start + len(sep)
    return Synthetic(a, b, truth, used)


def _edit(seg: str, c: Clause, rng: random.Random, words: list[str], share: float, zh: bool) -> str:
    body_start = (c.label_end - c.start) if c.label_end is not None else 0
    head, body = seg[:body_start], seg[body_start:]
    if zh:
        chars = list(body)
        for i in rng.sample(range(len(chars)), max(1, int(share * len(chars)))):
            if is_han(chars[i]):
                chars[i] = rng.choice(words)
        return head + "".join(chars)
    toks = re.split(r"(\s+)", body)
    idx = [i for i, t in enumerate(toks) if re.fullmatch(r"[A-Za-z]{3,}", t)]
    for i in rng.sample(idx, max(1, int(share * len(idx)))) if idx else []:
        toks[i] = rng.choice(words)
    return head + "".join(toks)


def _reword(seg: str, c: Clause, rng: random.Random, zh: bool) -> str:
    body_start = (c.label_end - c.start) if c.label_end is not None else 0
    head, body = seg[:body_start], seg[body_start:]
    sents = re.split(r"(?<=[.;。；])\s*", body.strip())
    sents = [s for s in sents if s]
    if len(sents) > 1:
        i = rng.randrange(len(sents) - 1)
        sents[i], sents[i + 1] = sents[i + 1], sents[i]
    body = (" " if not zh else "").join(sents)
    if not zh:
        def sub(m: re.Match) -> str:
            w = m.group(0)
            r = SYNONYMS.get(w.lower())
            if r and rng.random() < 0.8:
                return r.capitalize() if w[0].isupper() else r
            return "" if rng.random() < 0.08 else w
        body = re.sub(r"[A-Za-z]+", sub, body)
        body = re.sub(r"  +", " ", body)
    return head + " " + body.strip() if head and not zh else head + body


def _next_label(c: Clause, clauses: list[Clause], zh: bool) -> str:
    """The label of a new last sibling after clause c (so that nothing is renumbered)."""
    if zh:
        return ""  # an unmarked paragraph: a new 款 of the same 条 (or a paragraph)
    siblings = [x for x in clauses if x.parent == c.parent and x.style == c.style and x.number]
    n = c.number or ""
    m = re.match(r"^(.*?)(\d+)([.)]?)$", n)
    if m:
        top = max((int(re.match(r"^(?:.*?)(\d+)[.)]?$", x.number).group(1)) for x in siblings
                   if re.match(r"^(?:.*?)(\d+)[.)]?$", x.number or "")), default=int(m.group(2)))
        return f"{m.group(1)}{top + 1}{m.group(3)} "
    m = re.match(r"^\(([a-z])\)$", n)
    if m:
        top = max((x.number[1] for x in siblings if re.match(r"^\([a-z]\)$", x.number or "")), default=m.group(1))
        return f"({chr(ord(top) + 1)}) "
    return ""
