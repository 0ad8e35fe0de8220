"""Embedded data files: model and hardware catalogues, cost-model profiles."""
