#!/usr/bin/env python3
"""A NetworkPolicy enforcer for the test cluster of cluster.sh: a TEST FIXTURE, not a product.

No packaged policy engine runs offline here (Calico, Cilium, kube-router: none in Debian), so this
loop stands in for one. Every INTERVAL seconds it reads the API's pods, namespaces and
NetworkPolicies (kubectl, like node.sh's DNS loop) and compiles the *ingress* rules to one
nftables table, `inet syncopate_netpol`, loaded into every node's network namespace:

  - a pod selected by a policy with policyType Ingress accepts a new connection only when some
    rule of such a policy allows it: `from` peers (podSelector, namespaceSelector, both; ipBlock
    is not supported and admits nothing) and `ports` (numbers or container port names resolved
    on the destination pod; no ports = all ports);
  - replies and established connections pass (conntrack); pods no policy selects take anything;
  - the forward hook at priority -10: after kube-proxy's DNAT (a Service's virtual IP is judged
    as the pod behind it), before kube-proxy's own filter chain; pod-to-pod traffic bridged on one
    node passes that hook too (bridge-nf is on in the node namespaces);
  - every refused connection is counted (counter `denied`) and remembered as source address,
    destination address and port in the set `denied_src`; the loop copies that set to the file
    --denied (one "SRC DST PORT" line each, kept across reloads of the table), so a test can ask
    afterwards which pods were refused by which.

A pod's address is known before the API has it: the API publishes a pod's IP only after its
containers may already run, and a new pod's first connection would meet rules that do not know it
yet (seen: the `helm test` pod's first SYN to the coordinator refused). So the loop also reads
every 0.2 s the nodes' CNI address files (host-local IPAM, --node-dir: NODE_DIR/cni/ipam/...;
an address is written there before the pod's sandbox starts its containers), asks that node's
containerd which pod the sandbox belongs to, and compiles the rules with that address at once.
That still leaves a window (a scan, a kubectl call and a reload: up to a second or two on a loaded
machine; seen once more: the `helm test` pod's first SYN refused), so a new connection to a
selected pod from an address of the pod network (POD_CIDR) that no known pod has yet is dropped
without being counted or remembered: the enforcer cannot judge a source it cannot attribute, and
fails closed, as a real engine holds a new pod's traffic until its endpoint is programmed. The
client's SYN retransmission a second later is judged with the source known.

Not handled (the chart does not use them): egress rules, ipBlock, endPort, SCTP, host-network
pods. `--once` compiles and loads once (and prints the ruleset with --print).

  netpol.py --kubeconfig FILE --kubectl PATH --netns NS[,NS...] --denied FILE
            [--node-dir DIR]... [--pod-cidr 10.244.0.0/16] [--interval 1] [--once] [--print]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

TABLE = "syncopate_netpol"


def matches(selector, labels):
    """A LabelSelector (matchLabels + matchExpressions) against a label map; {} matches all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def labels_of(obj):
    return obj["metadata"].get("labels") or {}


def resolve_port(port, pod):
    """A NetworkPolicyPort's port (number or name) on the destination pod, or None."""
    if isinstance(port, int):
        return port
    if isinstance(port, str) and port.isdigit():
        return int(port)
    for container in pod["spec"].get("containers") or []:
        for p in container.get("ports") or []:
            if p.get("name") == port:
                return p["containerPort"]
    return None


def peers(rule_from, policy_ns, pods, namespaces):
    """The pod IPs a rule's `from` list admits (all of them for an empty/absent list: None)."""
    if not rule_from:
        return None
    ips = set()
    for peer in rule_from:
        pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
        if pod_sel is None and ns_sel is None:
            continue  # ipBlock only: not supported, admits nothing
        for pod in pods:
            ns = pod["metadata"]["namespace"]
            if ns_sel is None:
                if ns != policy_ns:
                    continue
            elif not matches(ns_sel, namespaces.get(ns, {})):
                continue
            if pod_sel is not None and not matches(pod_sel, labels_of(pod)):
                continue
            ips.add(pod["status"]["podIP"])
    return ips


def compile_rules(data, pod_cidr):
    items = data["items"]
    pods = [i for i in items if i["kind"] == "Pod" and (i.get("status") or {}).get("podIP")
            and not i["spec"].get("hostNetwork")]
    namespaces = {i["metadata"]["name"]: labels_of(i) for i in items if i["kind"] == "Namespace"}
    policies = [i for i in items if i["kind"] == "NetworkPolicy"
                and "Ingress" in (i["spec"].get("policyTypes") or ["Ingress"])]
    chains = {}
    for pod in pods:
        ns, ip = pod["metadata"]["namespace"], pod["status"]["podIP"]
        selecting = [p for p in policies if p["metadata"]["namespace"] == ns
                     and matches(p["spec"].get("podSelector", {}), labels_of(pod))]
        if not selecting:
            continue
        rules = []
        for policy in selecting:
            for rule in policy["spec"].get("ingress") or []:
                sources = peers(rule.get("from"), ns, pods, namespaces)
                if sources is not None and not sources:
                    continue
                src = "" if sources is None else "ip saddr { %s } " % ", ".join(sorted(sources))
                ports = rule.get("ports") or []
                if not ports:
                    rules.append(src + "accept")
                for port in ports:
                    number = resolve_port(port.get("port"), pod)
                    proto = port.get("protocol", "TCP").lower()
                    if port.get("port") is None:
                        rules.append("%smeta l4proto %s accept" % (src, proto))
                    elif number is not None:
                        rules.append("%s%s dport %d accept" % (src, proto, number))
        rules.append("ip saddr %s ip saddr != @known drop" % pod_cidr)  # not attributable yet
        rules.append("add @denied_src { ip saddr . ip daddr . th dport } counter name denied drop")
        rules.append("counter name denied drop")  # no port (ICMP): refused, not remembered
        chains[ip] = rules
    out = ["table inet %s {" % TABLE, "  counter denied {}",
           "  set denied_src { type ipv4_addr . ipv4_addr . inet_service; flags dynamic; size 65535; }",
           "  set known { type ipv4_addr; %s}" % (
               "elements = { %s } " % ", ".join(sorted({p["status"]["podIP"] for p in pods}))
               if pods else ""),
           "  chain forward {", "    type filter hook forward priority -10; policy accept;",
           "    ct state established,related accept"]
    names = {}
    for n, ip in enumerate(sorted(chains)):
        names[ip] = "pod%d" % n
        out.append("    ip daddr %s jump %s" % (ip, names[ip]))
    out.append("  }")
    for ip in sorted(chains):
        out.append("  chain %s {" % names[ip])
        out += ["    " + r for r in chains[ip]]
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def load(ruleset, netns):
    # Replace the table in one transaction: create it (a no-op if it exists), delete, define.
    script = "table inet %s\ndelete table inet %s\n%s" % (TABLE, TABLE, ruleset)
    for ns in netns:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=script.encode(),
                       check=True)


def denied_elements(netns):
    """The (src, dst, port) triples in the set denied_src of each namespace's table."""
    found = set()
    for ns in netns:
        got = subprocess.run(["ip", "netns", "exec", ns, "nft", "-j", "list", "set", "inet", TABLE,
                              "denied_src"], capture_output=True)
        if got.returncode != 0:
            continue  # no table yet
        for obj in json.loads(got.stdout)["nftables"]:
            for elem in (obj.get("set") or {}).get("elem") or []:
                if isinstance(elem, dict) and "elem" in elem:
                    elem = elem["elem"]["val"]
                found.add(tuple(str(v) for v in elem["concat"]))
    return found


def ipam_addresses(node_dirs, owners):
    """{ip: (namespace, pod name)} from the nodes' host-local IPAM files; owners caches sandbox
    id -> (namespace, name) (asked of the node's containerd once per sandbox)."""
    found = {}
    for node in node_dirs:
        for path in glob.glob(os.path.join(node, "cni", "ipam", "*", "*.*.*.*")):
            try:
                with open(path) as f:
                    sandbox = f.readline().strip()
            except OSError:
                continue  # released meanwhile
            if sandbox not in owners:
                got = subprocess.run(["ctr", "--address", os.path.join(node, "run", "containerd.sock"),
                                      "-n", "k8s.io", "containers", "info", sandbox], capture_output=True)
                if got.returncode != 0:
                    continue
                labels = json.loads(got.stdout).get("Labels") or {}
                owners[sandbox] = (labels.get("io.kubernetes.pod.namespace"),
                                   labels.get("io.kubernetes.pod.name"))
            found[os.path.basename(path)] = owners[sandbox]
    return found


def with_addresses(data, addresses):
    """data with the IPAM addresses filled in for pods whose status has none yet; the pods whose
    address is known but are not in data (data is older than them)."""
    by_name = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in data["items"]
               if i["kind"] == "Pod"}
    missing = []
    for ip, key in addresses.items():
        pod = by_name.get(key)
        if pod is None:
            missing.append(key)
        elif not (pod.get("status") or {}).get("podIP"):
            pod.setdefault("status", {})["podIP"] = ip
    return data, missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--netns", required=True)
    ap.add_argument("--denied", required=True)
    ap.add_argument("--node-dir", action="append", default=[])
    ap.add_argument("--pod-cidr", default="10.244.0.0/16")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--once", action="store_true")
    ap.add_argument("--print", action="store_true")
    args = ap.parse_args()
    netns = args.netns.split(",")
    last, denied, owners, api, fetched = None, set(), {}, None, 0.0
    while True:
        addresses = ipam_addresses(args.node_dir, owners)
        missing = api is None or with_addresses(json.loads(api), addresses)[1]
        if missing or time.time() - fetched >= args.interval:
            seen = denied_elements(netns)
            if not seen <= denied:
                denied |= seen
                with open(args.denied + ".new", "w") as f:
                    f.write("".join("%s %s %s\n" % d for d in sorted(denied)))
                os.replace(args.denied + ".new", args.denied)
            got = subprocess.run([args.kubectl, "--kubeconfig=" + args.kubeconfig, "get",
                                  "pods,namespaces,networkpolicies", "-A", "-o", "json"],
                                 capture_output=True)
            fetched = time.time()
            if got.returncode == 0:
                api = got.stdout
        if api is not None:
            ruleset = compile_rules(with_addresses(json.loads(api), addresses)[0], args.pod_cidr)
            if ruleset != last:
                try:
                    load(ruleset, netns)
                    last = ruleset
                    print(time.strftime("%H:%M:%S"), "loaded", ruleset.count(" chain ") - 1,
                          "pod chains", flush=True)
                except subprocess.CalledProcessError as e:
                    print("nft failed:", e, ruleset, file=sys.stderr, flush=True)
            if args.print:
                sys.stdout.write(ruleset)
        if args.once:
            return
        time.sleep(0.2)


if __name__ == "__main__":
    main()
