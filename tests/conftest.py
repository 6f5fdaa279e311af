"""Shared fixtures are pytest plugins in tests/fixtures/ (the cast, the running lab stack)."""

import pathlib

pytest_plugins = ["pytester"] + [
    f"fixtures.{p.stem}"
    for p in sorted((pathlib.Path(__file__).parent / "fixtures").glob("*.py"))
    if p.stem != "__init__"
]
