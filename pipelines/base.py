"""What every pipeline is: a name, a version, a result model, a way to find its inputs in a
folder, and a function from documents to a result.

The batch runner, the CLI, the export and the UI only talk to pipelines through this interface,
so a new pipeline is a subclass plus one line in `pipelines.registry`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from pipelines.documents import Document, IngestLimits, input_sha256, load_document
from pipelines.documents.ingest import SUPPORTED_SUFFIXES


class ResultBase(BaseModel):
    """Fields every export carries (the header; built by `result_header`). `input_sha256` and
    `pipeline_version` let a batch skip an input whose output is already up to date. Beside them
    each export has the `DocumentInfo` of what it analysed: `document` when the pipeline takes one
    document, `documents` when it takes several."""

    model_config = ConfigDict(extra="forbid")

    schema_version: str
    pipeline: str
    pipeline_version: str
    input_sha256: str


@dataclass(frozen=True)
class PipelineInput:
    """One unit of work: a single file, or a group of files analysed together (a contract pair,
    one patient's documents)."""

    input_id: str
    paths: tuple[Path, ...]

    def content_sha256(self) -> str:
        """`input_sha256` of the input's files (equal to that of the documents loaded from them)."""
        return input_sha256(self.paths)


def result_header(name: str, version: str, schema_version: str, docs: Sequence[Document],
                  input_sha: str = "") -> dict:
    """The ResultBase fields of an export of `docs`; `input_sha` defaults to `input_sha256(docs)`."""
    return {
        "schema_version": schema_version,
        "pipeline": name,
        "pipeline_version": version,
        "input_sha256": input_sha or input_sha256(docs),
    }


def is_candidate_file(path: Path) -> bool:
    return path.is_file() and not path.name.startswith(".") and path.suffix.lower() in SUPPORTED_SUFFIXES


class Pipeline(ABC):
    """A domain pipeline. Subclasses set the class attributes and implement `run_documents`."""

    name: ClassVar[str]
    title: ClassVar[str]
    version: ClassVar[str]
    schema_version: ClassVar[str]
    result_model: ClassVar[type[ResultBase]]

    def discover(self, folder: Path) -> list[PipelineInput]:
        """Inputs under `folder`: by default every supported file, recursively, one input each.
        Files named like provenance notes (PROVENANCE*, README*, *.truth.json) are skipped."""
        inputs = []
        for path in sorted(folder.rglob("*")):
            if not is_candidate_file(path) or any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            if path.name.upper().startswith(("PROVENANCE", "README", "LICENSE")):
                continue
            inputs.append(PipelineInput(path.relative_to(folder).as_posix(), (path,)))
        return inputs

    def load(self, inp: PipelineInput, limits: IngestLimits | None = None) -> list[Document]:
        return [load_document(p, limits=limits) for p in inp.paths]

    def run_input(self, inp: PipelineInput, limits: IngestLimits | None = None, llm=None) -> ResultBase:
        """Ingest the input's files and run the pipeline on them; `llm` (a pipelines.llm.LLMRun, None:
        rules only) runs the pipeline's LLM steps."""
        docs = self.load(inp, limits)
        if llm is None:
            return self.run_documents(docs, input_sha256=inp.content_sha256())
        return self.run_documents(docs, input_sha256=inp.content_sha256(), llm=llm)

    @abstractmethod
    def run_documents(self, docs: list[Document], input_sha256: str = "") -> ResultBase:
        """The pipeline proper: documents in, a result out. A pipeline with LLM steps also takes
        `llm` (a pipelines.llm.LLMRun; None or mode off: rules only, and the result's `llm` is None)."""

    @classmethod
    def header(cls, docs: Sequence[Document], input_sha: str = "") -> dict:
        """The ResultBase fields of this pipeline's export of `docs` (see `result_header`)."""
        return result_header(cls.name, cls.version, cls.schema_version, docs, input_sha)

    def summary_line(self, result: ResultBase) -> str:
        """A short human description of a result (batch log, UI)."""
        return ""

    def structure_answerer(self, result: ResultBase, docs: list[Document]):
        """What answers questions from this pipeline's own structure (a claim's dependencies, a
        clause's change): a callable question -> `pipelines.llm.Answer`, or None for a question the
        structure does not answer exactly (it goes to evidence search); None: no such answerer."""
        return None
