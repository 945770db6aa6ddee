"""crashlens: ranked root causes for crashed ML and GPU jobs.

    import crashlens
    a = crashlens.analyze(["run.log", "dmesg.txt"])    # or crashlens.analyze(log_text)
    print(a.causes[0].title, a.to_dict()["signature"])

See crashlens.api for the arguments and README.md ("Python API").
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `crashlens.analyze` is also the pipeline's module (crashlens/analyze.py); that module is
    # callable and calls crashlens.api.analyze, so `crashlens.analyze(...)` works whether or not
    # the module was imported first. Loaded on first use: `crashlens -V` imports no pipeline.
    if name in ("analyze", "api", "Analysis", "schema"):
        import importlib

        mod = importlib.import_module(f".{'api' if name != 'analyze' else 'analyze'}", __name__)
        return mod if name in ("analyze", "api") else getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
