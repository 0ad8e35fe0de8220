"""The notebooks run top to bottom (nbclient + ipykernel) with small request counts, and are
stored without outputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NAMES = ("validation.ipynb", "reference_study.ipynb", "capacity_planning.ipynb")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs(name):
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_executes(name, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("SIMKIT_NB_REQUESTS", os.environ.get("SIMKIT_NB_REQUESTS", "48"))
    monkeypatch.setenv("SIMKIT_NB_WORKERS", "2")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs if o.output_type == "stream")
    if name == "reference_study.ipynb":
        assert "llama-3.1-8b" in text and "k-exaone-236b" in text and "error" in text
    if name == "capacity_planning.ipynb":
        assert "CAUTION" in text and "replicas" in text
    if name == "validation.ipynb":
        assert "records under" in text
