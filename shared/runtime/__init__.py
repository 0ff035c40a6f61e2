"""Running a service: what each one opens at startup, its HTTP endpoints, metrics and logging."""
