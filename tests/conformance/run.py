#!/usr/bin/python3
"""The conformance suite through a real cluster (issue 42 item 3): each model of
tests/conformance/models trained by ``syncopate local`` (4 workers, 2 shards, sync unless said),
its final test metric against plain PyTorch's (tests/conformance/plain.py: the same module,
data, global batch, optimizer, schedule and epochs in one process).

  run.py --check [--bin_dir=DIR] [--models=a,b]
      ctest's quick check: every model once (seed 1) through the cluster; each must reach its
      recipe's ``floor`` (recipes.py). Exit 0 when all do.
  run.py --seeds=N [--first_seed=1] [--models=a,b] [--mode=sync|gba|auto] [--bin_dir=DIR]
         [--out=DIR]
      The comparison: N seeds of each model through the cluster and through plain PyTorch,
      alternated by seed; per-run lines in OUT/runs.tsv, then syncopate-seed-stats' means, 95%
      intervals and Welch's 95% interval of each cluster-minus-plain difference. A model passes
      when the mean difference is within its recipe's ``tolerance`` (recipes.py).

The processes load the syncopate package of this tree (SYNCOPATE_PYTHONPATH, unless set).
Numbers and how the bounds were derived: docs/measurements/pytorch-conformance.md.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import recipes  # noqa: E402

MODES = {"sync": "MODE_SYNC", "gba": "MODE_GBA", "auto": "MODE_AUTO"}


def cluster_run(bin_dir: str, name: str, seed: int, mode: str, workers: int, shards: int,
                run_dir: str, timeout: float) -> Optional[float]:
    """One ``syncopate local`` run: the final test metric, or None (and the reason on stderr)."""
    recipe = recipes.RECIPES[name]
    os.makedirs(run_dir, exist_ok=True)
    job = os.path.join(run_dir, "job.textproto")
    with open(job, "w") as f:
        f.write(recipes.job_text(name, recipe, seed, workers, shards, MODES[mode]))
    env = dict(os.environ)
    env.setdefault("SYNCOPATE_PYTHONPATH", os.path.join(ROOT, "python"))
    command = [os.path.join(bin_dir, "syncopate"), "local", f"--bin_dir={bin_dir}",
               f"--job={job}", f"--run_dir={os.path.join(run_dir, 'run')}",
               f"--timeout_seconds={int(timeout)}"]
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout + 60)
    report = os.path.join(run_dir, "run", "report.json")
    if done.returncode != 0 or not os.path.exists(report):
        tail = "\n".join(done.stdout.splitlines()[-5:])
        print(f"conformance: {name} seed {seed}: syncopate local exited {done.returncode}:\n"
              f"{tail}", file=sys.stderr)
        return None
    with open(report) as f:
        result = json.load(f)
    shard_modes = ", ".join(str(s.get("mode")) for s in result.get("shards", []))
    print(f"conformance: {name} seed {seed}: mode {result.get('mode')} (shards at the end: "
          f"{shard_modes}), {result.get('examples_per_second', 0):.0f} examples/s training",
          file=sys.stderr, flush=True)
    return float(result["final_auc" if recipe.metric == "AUC" else "final_accuracy"])


def plain_run(name: str, seed: int) -> float:
    done = subprocess.run([sys.executable, os.path.join(HERE, "plain.py"), f"--model={name}",
                           f"--seed={seed}"], stdout=subprocess.PIPE, text=True, check=True)
    return float(done.stdout.split()[-1])


def check(args, names: List[str]) -> int:
    failed = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        for name in names:
            recipe = recipes.RECIPES[name]
            began = time.monotonic()
            metric = cluster_run(args.bin_dir, name, 1, args.mode, args.workers, args.shards,
                                 os.path.join(tmp, name), args.timeout)
            seconds = time.monotonic() - began
            ok = metric is not None and metric >= recipe.floor
            shown = "no result" if metric is None else f"{metric:.4f}"
            print(f"{'ok  ' if ok else 'FAIL'} {name}: final test {recipe.metric.lower()} "
                  f"{shown} (floor {recipe.floor}) in {seconds:.0f} s", flush=True)
            if not ok:
                failed.append(name)
    if failed:
        print(f"conformance: {len(failed)} of {len(names)} below their floor: "
              f"{', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def compare(args, names: List[str]) -> int:
    out = args.out or os.path.join(ROOT, "bench-results", "conformance")
    os.makedirs(out, exist_ok=True)
    tsv = os.path.join(out, "runs.tsv")
    with open(tsv, "w") as f:
        f.write("model\tseed\tconfig\tmetric\tseconds\n")
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        for name in names:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                for config in ("syncopate", "plain"):
                    began = time.monotonic()
                    if config == "plain":
                        metric = plain_run(name, seed)
                    else:
                        metric = cluster_run(args.bin_dir, name, seed, args.mode, args.workers,
                                             args.shards, os.path.join(tmp, f"{name}-{seed}"),
                                             args.timeout)
                        if metric is None:
                            return 1
                    line = (f"{name}\t{seed}\t{config}\t{metric:.6f}\t"
                            f"{time.monotonic() - began:.1f}")
                    print(line, flush=True)
                    with open(tsv, "a") as f:
                        f.write(line + "\n")
    failed = []
    for name in names:
        per_model = os.path.join(out, f"{name}.tsv")
        with open(tsv) as f, open(per_model, "w") as g:
            rows = f.read().splitlines()
            g.write("\n".join([rows[0]] + [r for r in rows[1:] if r.startswith(name + "\t")]))
            g.write("\n")
        stats = subprocess.run([os.path.join(args.bin_dir, "syncopate-seed-stats"),
                                f"--tsv={per_model}", "--group=config", "--seed=seed",
                                "--values=metric", "--ref=plain"],
                               stdout=subprocess.PIPE, text=True, check=True).stdout
        mean, low, high = difference(stats)
        tolerance = recipes.RECIPES[name].tolerance
        verdict = "within" if abs(mean) <= tolerance else "BEYOND"
        print(f"--- {name}:\n{stats}    syncopate - plain: {mean:+.4f} [{low:+.4f}, {high:+.4f}]"
              f" (Welch 95%): {verdict} the tolerance {tolerance}", flush=True)
        if abs(mean) > tolerance:
            failed.append(name)
    if failed:
        print(f"conformance: beyond tolerance: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def difference(stats: str) -> Tuple[float, float, float]:
    """Cluster minus plain (mean, 95% low, high) from syncopate-seed-stats' Welch line, which
    states ``plain - syncopate: +d [lo, hi]``."""
    for line in stats.splitlines():
        if "plain - syncopate:" in line:
            after = line.split("plain - syncopate:")[1]
            mean = float(after.split("[")[0])
            low, high = (float(v) for v in after[after.index("[") + 1:after.index("]")].split(","))
            return -mean, -high, -low
    raise ValueError(f"no difference in syncopate-seed-stats' output:\n{stats}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--seeds", type=int, default=0)
    parser.add_argument("--first_seed", type=int, default=1)
    parser.add_argument("--models", default="")
    parser.add_argument("--mode", default="sync", choices=sorted(MODES))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--bin_dir", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--out", default="")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    names = args.models.split(",") if args.models else recipes.QUICK
    unknown = [n for n in names if n not in recipes.RECIPES]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {sorted(recipes.RECIPES)}")
    if args.check == (args.seeds > 0):
        parser.error("one of --check or --seeds=N")
    return check(args, names) if args.check else compare(args, names)


if __name__ == "__main__":
    sys.exit(main())
