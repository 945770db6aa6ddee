"""crashlens: ranked root causes for crashed ML and GPU jobs.

    import crashlens
    a = crashlens.analyze(["run.log", "dmesg.txt"])    # or crashlens.analyze(log_text)
    print(a.causes[0].title, a.to_dict()["signature"])

See crashlens.api for the arguments and README.md ("Python API").
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # crashlens.analyze / Analysis / schema are crashlens.api's, loaded on first use
    # (`crashlens -V` imports no pipeline); crashlens.pipeline wires the stages.
    if name in ("analyze", "Analysis", "schema"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
