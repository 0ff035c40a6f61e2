"""TLS for a deployment: a private certificate authority and the servers' certificates (`engram certs`)."""
