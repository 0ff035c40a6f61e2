"""engram's services (ingestor, retriever, consolidator) and the CLI that composes them."""
