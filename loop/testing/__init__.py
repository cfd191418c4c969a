"""Test helpers users can import in their own tests (product code).

Modules: :mod:`loop.testing.anthropic_mock` (a local mock of the Anthropic Messages API).
"""
