"""The pipelines longdoc knows, by name. Imports are lazy: naming a pipeline loads only it.

Third-party pipelines plug in as Python entry points of the group `longdoc.pipelines`, declared by
an installed package (in its pyproject.toml)::

    [project.entry-points."longdoc.pipelines"]
    invoices = "longdoc_invoices.pipeline:InvoicesPipeline"

Installing such a package is the act that lets longdoc run its code, as with any plug-in; nothing
is imported because of an environment variable. A plug-in cannot take a built-in pipeline's name.
Worker processes see the same installed packages (and `sys.path`), so a batch's workers find it too.
"""

from __future__ import annotations

import importlib
import logging
from importlib.metadata import EntryPoint, entry_points

from pipelines.base import Pipeline

log = logging.getLogger(__name__)
GROUP = "longdoc.pipelines"

_PIPELINES: dict[str, str] = {
    "contracts": "pipelines.contracts.pipeline:ContractsPipeline",
    "patents": "pipelines.patents.pipeline:PatentsPipeline",
    "medical": "pipelines.medical.pipeline:MedicalPipeline",
    "reports": "pipelines.reports.pipeline:ReportsPipeline",
}


def _table() -> dict[str, str | EntryPoint]:
    table: dict[str, str | EntryPoint] = dict(_PIPELINES)
    for ep in entry_points(group=GROUP):
        if ep.name in _PIPELINES:
            log.warning("entry point %s = %s ignored: %r is a built-in pipeline", ep.name, ep.value, ep.name)
            continue
        table.setdefault(ep.name, ep)
    return table


def available() -> list[str]:
    return sorted(_table())


def get_pipeline(name: str) -> Pipeline:
    table = _table()
    if name not in table:
        raise KeyError(f"unknown pipeline {name!r}; available: {', '.join(sorted(table))}")
    target = table[name]
    if isinstance(target, EntryPoint):
        return target.load()()
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)()
