"""Tenants: who they are (the registry `engram tenants` keeps), what NATS lets each do (its account), and how much
(quotas NATS enforces, and the request and ingest rates engram enforces)."""
