"""The pipelines longdoc knows, by name. Imports are lazy: naming a pipeline loads only it."""

from __future__ import annotations

import importlib

from pipelines.base import Pipeline

_PIPELINES: dict[str, str] = {
    "patents": "pipelines.patents.pipeline:PatentsPipeline",
}


def available() -> list[str]:
    return sorted(_PIPELINES)


def get_pipeline(name: str) -> Pipeline:
    if name not in _PIPELINES:
        raise KeyError(f"unknown pipeline {name!r}; available: {', '.join(available())}")
    module, cls = _PIPELINES[name].split(":")
    return getattr(importlib.import_module(module), cls)()
