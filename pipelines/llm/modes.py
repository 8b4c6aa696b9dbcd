"""`--llm off|auto|on` and the registry of LLM steps with the measurements that put them in `auto`.

A pipeline declares each LLM step by name. `off` runs none (the output is the rules-only one),
`on` runs every step, `auto` runs a step only where the registry holds a measured gain for the
configured model (by fingerprint, or "default" for the packaged Gemma 3 270M): the measurement
(metric, value with and without the step, the command that produced it) is kept beside the
decision so a reader can check it. A step with no measurement, or with one that showed no gain,
stays out of `auto`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

DEFAULT_MODEL = "default"  # the packaged Gemma 3 270M


class LLMMode(StrEnum):
    OFF = "off"
    AUTO = "auto"
    ON = "on"

    @classmethod
    def parse(cls, value: str | LLMMode) -> LLMMode:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"--llm must be off, auto or on, not {value!r}") from None


@dataclass(frozen=True)
class Measurement:
    """What a step did on the development data with one model: `metric` with and without the step,
    and the command that measured it."""

    metric: str
    without: float
    with_step: float
    command: str
    date: str

    @property
    def gain(self) -> float:
        return self.with_step - self.without


@dataclass(frozen=True)
class StepDecision:
    step: str
    model: str
    in_auto: bool
    measurement: Measurement | None
    note: str = ""


# step name -> model fingerprint (or DEFAULT_MODEL) -> decision. Only measured gains go in auto.
REGISTRY: dict[str, dict[str, StepDecision]] = {}  # filled by each pipeline's llm_steps module


def decision(step: str, model: str = DEFAULT_MODEL) -> StepDecision | None:
    """The registry's decision for `step` with `model`, or None when the step was never measured with it."""
    return REGISTRY.get(step, {}).get(model)


def step_enabled(step: str, mode: LLMMode | str, model: str = DEFAULT_MODEL, estimated_s: float | None = None,
                 budget_s: float | None = None) -> bool:
    """Whether `step` runs under `mode` with `model`: off never, on always, auto only where the
    registry holds a measured gain for that model and the step's estimated time on this device
    (`estimated_s`, when the caller has one) is within `budget_s`."""
    mode = LLMMode.parse(mode)
    if mode is LLMMode.OFF:
        return False
    if mode is LLMMode.ON:
        return True
    d = decision(step, model)
    if not (d and d.in_auto and d.measurement is not None and d.measurement.gain > 0):
        return False
    return estimated_s is None or budget_s is None or estimated_s <= budget_s


def register(decision: StepDecision) -> None:
    """Record a step's decision for a model (a pipeline module calls this at import)."""
    if decision.in_auto and (decision.measurement is None or decision.measurement.gain <= 0):
        raise ValueError(f"{decision.step}: a step goes in auto only with a measured gain")
    REGISTRY.setdefault(decision.step, {})[decision.model] = decision
