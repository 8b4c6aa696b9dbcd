"""longdoc tests; the layout mirrors the packages (tests/app, tests/engine, tests/longdoc_kernels, tests/pipelines/...)."""
