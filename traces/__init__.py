"""Trace ingestion: real prompt/output pairs, tokenizers, corpus definitions and derived profiles."""
