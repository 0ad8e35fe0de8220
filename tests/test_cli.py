"""The CLI starts, lists its commands and turns user errors into one clear line."""

from typer.testing import CliRunner

from simkit import __version__
from simkit.cli import app


def test_version_prints_package_version():
    result = CliRunner().invoke(app, ["version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__
