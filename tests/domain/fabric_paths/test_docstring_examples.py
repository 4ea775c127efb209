"""The examples in the fabric path, job and cluster modules' docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["cluster", "fabric", "fabric_paths", "fabric_jobs"])
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(f"apps.domain.{name}"))
    assert result.failed == 0 and result.attempted > 0
