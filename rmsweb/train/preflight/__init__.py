"""The preflight stage: minutes on the spec's own GPUs before anything expensive runs."""
