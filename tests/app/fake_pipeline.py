"""A tiny pipeline for testing the batch runner, CLI and export machinery on their own.

It counts the lines of a document. Files whose text contains CRASH raise a bug-like error;
SLOW sleeps a second (to test interruption). Plugged in as an entry point (tests/app/plugins.py).
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from pipelines.base import Pipeline, ResultBase
from pipelines.documents import Document, DocumentInfo, SourceSpan


class LineCount(BaseModel):
    index: int
    span: SourceSpan


class CountResult(ResultBase):
    document: DocumentInfo
    lines: list[LineCount]


class CountPipeline(Pipeline):
    name = "count"
    title = "Line count"
    version = "1.0"
    schema_version = "1.0"
    result_model = CountResult

    def run_documents(self, docs: list[Document], input_sha256: str = "") -> CountResult:
        doc = docs[0]
        if "CRASH" in doc.text:
            raise RuntimeError("simulated pipeline bug")
        if "SLOW" in doc.text:
            time.sleep(1.0)
        lines, pos = [], 0
        for i, line in enumerate(doc.text.split("\n")):
            if line.strip():
                lines.append(LineCount(index=i, span=doc.span(pos, pos + len(line))))
            pos += len(line) + 1
        return CountResult(**self.header(docs, input_sha256), document=doc.info(), lines=lines)

    def summary_line(self, result: CountResult) -> str:
        return f"{len(result.lines)} lines"
