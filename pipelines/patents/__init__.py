"""Patent claim-tree pipeline."""
