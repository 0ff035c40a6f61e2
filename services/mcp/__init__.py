"""`engram mcp`: a Model Context Protocol server that lets an agent use engram within one tenant and user."""
