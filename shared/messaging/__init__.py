"""NATS plumbing: subjects, streams, the embedded server, connections, consumers, dead letters, replies, events."""
