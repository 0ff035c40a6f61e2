"""Documentation generated from code: the configuration reference page (`engram docs config`)."""
