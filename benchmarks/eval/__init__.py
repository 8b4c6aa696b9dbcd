"""Measuring the pipelines against truth: scoring, synthetic test pairs and threshold calibration.

- `contracts_evaluate`: clause-alignment scores against a truth file (`score`);
- `contracts_synthetic`: version pairs with known truth, made by altering a real contract (`make_pair`);
- `contracts_calibrate`: the alignment threshold measured over real and synthetic pairs;
- `reports_evaluate`: target detection and mention resolution against a truth file (`score`);
- `medical_evaluate`: entity, assertion, date, section, vital and evidence scores on the medical
  truth files (`score_synthea`, `score_cmbclin`).

Each runs as a module from the repository root (`python -m benchmarks.eval.contracts_calibrate ...`)
and is imported by the tests and benchmark scripts as `benchmarks.eval.<name>`. The product
packages never import it; constants it measured (the contracts alignment thresholds) live in the
pipeline beside the code that uses them.
"""
