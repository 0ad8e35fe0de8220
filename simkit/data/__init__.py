"""Embedded data files: model and hardware catalogues, calibrations (fitted cost-model coefficients)."""
