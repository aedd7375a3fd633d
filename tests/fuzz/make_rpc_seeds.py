#!/usr/bin/python3
"""Writes the seed corpus of the rpc fuzz target (tests/fuzz/corpus/rpc): one file per request
kind, a kind byte followed by the request's protobuf encoding (see fuzz_rpc.cc). Run once from
the repository root with the build's Python stubs:
    PYTHONPATH=build/python /usr/bin/python3 tests/fuzz/make_rpc_seeds.py
"""
import os

from hpo.v1 import hpo_pb2 as pb

OUT = "tests/fuzz/corpus/rpc"
SPEC = open("examples/quickstart.yaml").read()
ASHA = open("examples/asha.yaml").read()
seeds = {
    "validate": (0, pb.ValidateSweepRequest(spec_yaml=SPEC, source="q.yaml")),
    "validate_bad": (0, pb.ValidateSweepRequest(spec_yaml="parameters: {x: [1]}\nobjective: m\n", source="b.yaml")),
    "submit": (1, pb.SubmitSweepRequest(spec_yaml=SPEC, source="q.yaml")),
    "submit_asha": (1, pb.SubmitSweepRequest(spec_yaml=ASHA, source="a.yaml")),
    "report": (2, pb.ReportRequest(trial_id=1, step=3, metrics={"val_acc": 0.5, "val_loss": 1.0})),
    "report_nan": (2, pb.ReportRequest(trial_id=3, step=1, metrics={"val_acc": float("nan")})),
    "report_nostep": (2, pb.ReportRequest(trial_id=5, metrics={"val_acc": 0.9})),
    "trials": (3, pb.ListTrialsRequest(sweep_id=1, limit=10)),
    "trial": (4, pb.GetTrialRequest(trial_id=1, include_reports=True)),
    "cancel": (5, pb.CancelSweepRequest(sweep_id=1)),
    "pause": (6, pb.PauseSweepRequest(sweep_id=2)),
    "resume": (7, pb.ResumeSweepRequest(sweep_id=2)),
    "sweep": (8, pb.GetSweepRequest(sweep_id=1)),
    "sweeps": (9, pb.ListSweepsRequest(active_only=True)),
    "allow_node": (10, pb.AllowNodeRequest(sweep_id=1, node="n1")),
    "plan": (11, pb.PlanSweepRequest(spec_yaml=ASHA, source="a.yaml", steps=27, step_seconds=2)),
    "tick": (12, None),
}
os.makedirs(OUT, exist_ok=True)
for name, (kind, msg) in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(bytes([kind]) + (msg.SerializeToString() if msg is not None else b"\x05"))
print(f"{len(seeds)} seeds in {OUT}")
