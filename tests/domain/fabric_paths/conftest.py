"""The fabric tests' shared fixtures (tests/domain/fabric_paths/inputs.py)."""

from tests.domain.fabric_paths.inputs import superpod, superpod_text, superpod_view  # noqa: F401
