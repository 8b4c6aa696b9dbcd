"""The pipelines longdoc knows, by name. Imports are lazy: naming a pipeline loads only it.

More pipelines can be plugged in without editing this file through the environment variable
LONGDOC_PIPELINES="name=package.module:Class[,name2=...]" (worker processes inherit it).
"""

from __future__ import annotations

import importlib
import os

from pipelines.base import Pipeline

_PIPELINES: dict[str, str] = {
    "contracts": "pipelines.contracts.pipeline:ContractsPipeline",
    "patents": "pipelines.patents.pipeline:PatentsPipeline",
    "medical": "pipelines.medical.pipeline:MedicalPipeline",
    "reports": "pipelines.reports.pipeline:ReportsPipeline",
}


def _table() -> dict[str, str]:
    table = dict(_PIPELINES)
    for item in os.environ.get("LONGDOC_PIPELINES", "").split(","):
        name, _, target = item.partition("=")
        if name.strip() and ":" in target:
            table[name.strip()] = target.strip()
    return table


def available() -> list[str]:
    return sorted(_table())


def get_pipeline(name: str) -> Pipeline:
    table = _table()
    if name not in table:
        raise KeyError(f"unknown pipeline {name!r}; available: {', '.join(sorted(table))}")
    module, cls = table[name].split(":")
    return getattr(importlib.import_module(module), cls)()
