"""`engram console`: a web view of one tenant's memory (or every tenant's, for an operator), served by engram.

It is a client of engram's own contract (engram_client over NATS): a tenant signs in with its product's NKey seed and
the console connects to NATS as that product, so it sees exactly what those credentials reach; an operator signs in
with the console's token and the console connects with engram's own identity. Pages are rendered on the server
(Jinja2, autoescaped) with one small script for the live events; every change is a POST carrying the session's CSRF
token, and every page is sent with a strict content security policy.
"""
