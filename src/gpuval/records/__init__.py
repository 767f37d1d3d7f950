"""Typed records the parsers produce; one module per tool family, plus the shared base."""
