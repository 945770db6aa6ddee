"""crashlens: ranked root causes for crashed ML and GPU jobs."""

__version__ = "0.1.0"
