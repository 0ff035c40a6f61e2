"""NATS plumbing of the services: streams, the embedded server, brokers, consumers, dead letters, replies, events
(subjects and the client connection are engram_client's)."""
