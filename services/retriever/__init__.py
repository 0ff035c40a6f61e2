"""The retriever service: recall and entries by request-reply."""
