"""Drawings of pipeline results for people: one module per pipeline (`contracts`: terminal report and
HTML redline; `patents`: claim tree for the terminal and Graphviz DOT; `reports`: terminal tables).
The CLI and the UI pages call them; the pipelines return results and draw nothing."""
