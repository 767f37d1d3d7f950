"""A local stand-in for Lambda's Cloud API (see server.py and README.md)."""

from .server import FakeInstance, FakeLambdaCloud, FakeType, Machine

__all__ = ["FakeInstance", "FakeLambdaCloud", "FakeType", "Machine"]
