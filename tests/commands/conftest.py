"""Fixtures the command tests share with their domains' tests."""

from __future__ import annotations

from tests.themes.conftest import root

__all__ = ["root"]  # a populated theme workspace, for test_theme.py
