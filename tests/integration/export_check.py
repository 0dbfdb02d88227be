"""The Python side of tests/integration/export_test.sh: a job's export scored outside the cluster
must score what the cluster's evaluator scored.

  export_check.py builtin EXPORT REPORT_JSON TEST_FILE CPP_KEYS CPP_PREDICTIONS [--kept]
  export_check.py torch EXPORT REPORT_JSON TEST_FILE MODULE
"""
import json
import sys

import numpy as np
import torch

import syncopate.export as se
import syncopate.keys as sk
import syncopate.models as sm
from syncopate.metrics import auc
from syncopate.readers import read_criteo
from syncopate.torch._host import load_user_module


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def log_loss(probabilities, labels):
    """model::LogLoss: p clamped to [1e-7, 1 - 1e-7]."""
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 1e-7, 1 - 1e-7)
    return float(np.mean(-(labels * np.log(p) + (1 - labels) * np.log(1 - p))))


def evaluation(report, kept):
    if kept:
        if "kept_eval" not in report:
            fail("the run kept no version")
        return report["kept_eval"]
    return {"auc": report["final_auc"], "loss": report["final_loss"]}


def close(name, ours, theirs, tolerance=1e-6):
    print(f"{name}: outside the cluster {ours:.9f}, the cluster's evaluator {theirs:.9f}")
    if abs(ours - theirs) > tolerance:
        fail(f"{name} differs by {abs(ours - theirs):.3g} (> {tolerance})")


def check_builtin(export, report_path, test_file, cpp_keys, cpp_predictions, kept):
    report = json.load(open(report_path))
    # The pure-Python key function against the C++ reader and CategoricalKey, every key.
    dataset = read_criteo(test_file)
    keys = sk.criteo_keys(dataset.values)
    expected_keys = np.load(cpp_keys)
    if keys.shape != expected_keys.shape or not np.array_equal(keys, expected_keys):
        fail(f"the Python keys of {test_file} differ from the C++ ones "
             f"({int(np.sum(keys != expected_keys))} of {keys.size})")
    print(f"keys: all {keys.size} of {len(dataset.labels)} rows equal the C++ CategoricalKey")
    manifest = json.load(open(f"{export}/manifest.json"))
    model = se.load_model(export)
    model.eval()
    batch = {"numeric": torch.from_numpy(dataset.numeric),
             "categorical": torch.from_numpy(keys.view(np.int64))}
    with torch.no_grad():
        probabilities = torch.sigmoid(model(batch).reshape(-1).float()).numpy()
    # model.pt, loaded by plain PyTorch, gives the same model.
    fresh = sm.CtrModel.from_manifest(manifest["model"])
    fresh.load_state_dict(torch.load(f"{export}/model.pt"), strict=True)
    fresh.eval()
    with torch.no_grad():
        again = torch.sigmoid(fresh(batch).reshape(-1).float()).numpy()
    if not np.array_equal(probabilities, again):
        fail("model.pt does not give the model the export holds")
    cpp = np.load(cpp_predictions)
    worst = float(np.max(np.abs(probabilities.astype(np.float64) - cpp)))
    print(f"per-example probabilities: largest difference from the C++ model {worst:.3g}")
    if worst > 1e-5:
        fail(f"a prediction differs from the C++ evaluator's by {worst:.3g} (> 1e-5)")
    scored = evaluation(report, kept)
    close("test AUC", auc(probabilities, dataset.labels), scored["auc"])
    close("test loss", log_loss(probabilities, dataset.labels), scored["loss"])


def check_torch(export, report_path, test_file, module):
    report = json.load(open(report_path))
    user = load_user_module(module)
    model = user.model()
    model.load_state_dict(torch.load(f"{export}/model.pt"), strict=True)
    model.eval()
    data = user.test_dataset(type("Data", (), {"test_path": test_file, "test_limit": 0,
                                               "block_size": 4096})())
    probabilities, labels, loss_sum = [], [], 0.0
    with torch.no_grad():
        # In the evaluator's chunks, its loss as it sums it (python/syncopate/torch/_host.py).
        for begin in range(0, len(data), 8192):
            inputs, target = data.__getitems__(list(range(begin, min(len(data), begin + 8192))))
            output = model(inputs)
            loss_sum += float(user.loss(output, target)) * len(target)
            probabilities.append(torch.sigmoid(output.reshape(-1).float()).numpy())
            labels.append(target.reshape(-1).float().numpy())
    probabilities, labels = np.concatenate(probabilities), np.concatenate(labels)
    close("test AUC", auc(probabilities, labels), report["final_auc"])
    close("test loss", loss_sum / len(labels), report["final_loss"])
    buffers = dict(model.named_buffers())
    if torch.equal(buffers["norm.running_var"], torch.ones(32)):
        fail("the BatchNorm's running statistics are the initial ones: not trained")
    print(f"BatchNorm: {int(buffers['norm.num_batches_tracked'])} batches tracked")


if __name__ == "__main__":
    if sys.argv[1] == "builtin":
        check_builtin(*sys.argv[2:7], kept="--kept" in sys.argv)
    elif sys.argv[1] == "torch":
        check_torch(*sys.argv[2:6])
    else:
        fail(f"unknown check {sys.argv[1]}")
