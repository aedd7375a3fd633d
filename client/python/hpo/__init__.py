"""hpo: the Python client of hpod, for notebooks and scripts.

    import hpo
    c = hpo.Client()                    # the local daemon, found like the `hpo` CLI finds it
    s = c.submit("sweep.yaml")          # a path, a YAML string or a dict
    s.status(); s.trials()              # a pandas DataFrame, one row per trial
    s.curves(); s.best(); s.cancel()

Inside a trial: ``hpo.report(step=3, val_acc=0.91)`` (reads the trial's environment).
The gRPC stubs in ``hpo.v1`` are generated at build time from proto/hpo/v1/hpo.proto.
"""
from hpo.client import Client, ExternalTrial, Sweep, HpoError, report

__all__ = ["Client", "ExternalTrial", "Sweep", "HpoError", "report"]
