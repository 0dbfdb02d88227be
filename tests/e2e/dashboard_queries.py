#!/usr/bin/env python3
"""Runs every query of Grafana dashboards against a live Prometheus, as Grafana would.

Waits until every scrape target is up and the cluster has shown what the dashboards are about
(a mode switch, an evaluation, staleness, slowdowns), resolves each template variable through
the Prometheus API (label_values), substitutes the variables and Grafana's built-in intervals,
then runs every panel target: range targets through /api/v1/query_range over the run, instant
ones through /api/v1/query. Each must succeed and return at least one finite sample.
Usage: dashboard_queries.py --prometheus=URL --expected_targets=N DASHBOARD.json...
"""
import argparse
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

RATE_INTERVAL = "15s"  # Grafana's $__rate_interval for a 1 s scrape over a short range

# What must be true of the cluster before the dashboards can show it.
READY = {
    "all targets up": 'count(up{job="syncopate"} == 1)',
    "a shard switched mode": 'sum(syncopate_coordinator_mode_switches_total{job="syncopate"})',
    "a shard seen in gba": 'max(max_over_time(syncopate_shard_mode{job="syncopate",mode="gba"}[5m]))',
    "an evaluation with AUC": 'max(syncopate_eval_auc{job="syncopate"})',
    "slowdowns measured": 'count(syncopate_coordinator_worker_slowdown{job="syncopate"})',
    "staleness observed": 'sum(syncopate_shard_staleness_count{job="syncopate"})',
    "step times observed": 'sum(syncopate_worker_step_seconds_count{job="syncopate",phase="compute"})',
}


class Prometheus:
    def __init__(self, url):
        self.url = url.rstrip("/")
        self.queries = 0

    def get(self, path, **params):
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as response:
            body = json.load(response)
        self.queries += 1
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def scalar(self, expr):
        result = self.get("/api/v1/query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None


def wait_until_ready(prom, expected_targets, wait_seconds):
    deadline = time.time() + wait_seconds
    while True:
        try:
            values = {name: prom.scalar(expr) for name, expr in READY.items()}
        except urllib.error.URLError as error:
            # Prometheus prints its URL a moment before it listens; a refused connection while
            # it starts is waited out like any other missing readiness condition.
            if time.time() > deadline:
                sys.exit(f"prometheus unreachable after {wait_seconds} s: {error}")
            time.sleep(1)
            continue
        missing = [n for n, v in values.items() if v is None or v <= 0]
        if values["all targets up"] != expected_targets:
            missing.append(f"all targets up ({values['all targets up']} of {expected_targets})")
        if not missing:
            return
        if time.time() > deadline:
            sys.exit(f"cluster not ready after {wait_seconds} s: {', '.join(sorted(set(missing)))}")
        time.sleep(1)


def label_values(prom, query, start, end):
    """Grafana's label_values(selector, label) / label_values(label) variable query."""
    match = re.fullmatch(r"label_values\((?:(.+),\s*)?(\w+)\)", query.strip())
    if not match:
        raise RuntimeError(f"unsupported variable query {query!r}")
    selector, label = match.groups()
    params = {"start": start, "end": end}
    if selector:
        params["match[]"] = selector
    return sorted(prom.get(f"/api/v1/label/{label}/values", **params))


def substitute(expr, variables, start, end):
    builtins = {
        "__rate_interval": RATE_INTERVAL,
        "__interval": "5s",
        "__range": f"{max(1, int(end - start))}s",
    }
    def value(match):
        name = match.group(1) or match.group(2)
        if name in builtins:
            return builtins[name]
        if name not in variables:
            raise RuntimeError(f"unknown variable ${name} in {expr}")
        return variables[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def finite_samples(data):
    samples = 0
    for series in data["result"]:
        points = series.get("values") or ([series["value"]] if "value" in series else [])
        samples += sum(1 for _, v in points if math.isfinite(float(v)))
    return samples


def run_dashboard(prom, path, start, end):
    dashboard = json.load(open(path))
    title = dashboard["title"]
    variables = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var["type"] == "datasource":
            continue
        if var["type"] != "query":
            raise RuntimeError(f"{title}: unsupported variable type {var['type']}")
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        values = label_values(prom, substitute(query, variables, start, end), start, end)
        if not values:
            raise RuntimeError(f"{title}: variable ${var['name']} ({query}) has no values")
        # Grafana's "All" for a multi-value variable in PromQL: a regex alternation, with regex
        # metacharacters escaped for RE2 inside a PromQL string (a doubled backslash).
        escape = lambda v: re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\\\1", v)
        variables[var["name"]] = (
            "(" + "|".join(escape(v) for v in values) + ")" if var.get("multi") else values[0])
        print(f"  ${var['name']} = {variables[var['name']]}")
    results = {}
    failures = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = substitute(target["expr"], variables, start, end)
            where = f"{title} / {panel['title']} / {target['refId']}"
            try:
                if target.get("instant"):
                    data = prom.get("/api/v1/query", query=expr, time=end)
                else:
                    data = prom.get("/api/v1/query_range", query=expr, start=start, end=end, step=1)
            except Exception as error:  # an HTTP 400 (bad PromQL) lands here too
                failures.append(f"{where}: {error}")
                continue
            samples = finite_samples(data)
            results[(panel["title"], target["refId"])] = data
            print(f"  {'ok ' if samples else 'NO DATA'} {where}: {len(data['result'])} series, "
                  f"{samples} samples")
            if not samples:
                failures.append(f"{where}: no data for {expr}")
    return results, failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--prometheus", required=True)
    parser.add_argument("--expected_targets", type=int, required=True)
    parser.add_argument("--wait_seconds", type=int, default=120)
    parser.add_argument("dashboards", nargs="+")
    args = parser.parse_args()
    prom = Prometheus(args.prometheus)

    begin = time.time()
    wait_until_ready(prom, args.expected_targets, args.wait_seconds)
    time.sleep(3)  # a few more scrapes after the switch, so rates over the switch exist
    end = time.time()
    # The panels show the whole run, from before Prometheus started (it started just before us,
    # and its first scrape can come after the first mode switch: the switches table must count
    # that switch anyway).
    start = begin - 60
    print(f"cluster ready after {end - begin:.0f} s; querying {end - start:.0f} s of data")

    failures = []
    all_results = {}
    before = prom.queries
    for path in args.dashboards:
        results, dashboard_failures = run_dashboard(prom, path, start, end)
        all_results.update(results)
        failures += dashboard_failures

    # The dashboards must show what happened, not just any number.
    # A shard's mode panel shows sync (1) and gba (2) only if Prometheus scraped it before the
    # first switch, which on this machine comes ~5 s into the run, before Prometheus's first
    # scrape (its discovery and scrape managers each wait up to 5 s): only gba is required.
    modes = all_results.get(("Mode of each shard", "A"))
    seen = {float(v) for s in (modes or {}).get("result", []) for _, v in s["values"]}
    if 2.0 not in seen or not seen <= {1.0, 2.0}:
        failures.append(f"'Mode of each shard' does not show gba (2), or shows a mode auto never runs: "
                        f"saw {sorted(seen)}")
    switches = all_results.get(("Switches and decisions in the time range", "A"))
    if not switches or max(float(s["value"][1]) for s in switches["result"]) < 1:
        failures.append("'Switches and decisions in the time range' shows no switch")

    targets = sum(len(p.get("targets", [])) for d in args.dashboards for p in json.load(open(d))["panels"])
    print(f"{prom.queries - before} dashboard queries ran against Prometheus ({targets} panel "
          f"targets, {prom.queries - before - targets} variable queries), after "
          f"{before} readiness polls")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
