"""Model and hardware catalogues."""
