"""Data ingestion: sources, validation, deduplication and splits (polars)."""
