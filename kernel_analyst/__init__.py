"""kernel-analyst: a stateful Jupyter-kernel engine for data-analysis agents."""
