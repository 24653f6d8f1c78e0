"""Every AWS API action the Rust code calls is granted to the role that calls it, and nothing
more: the Lambda's role (terraform/iam.tf) for lambda/ and the cluster instance policy
(terraform/cluster_policy.tf) for shipper/, both through sink/. Deny statements (which grant
nothing) are left out.

The actions are found from the code itself: each `.operation_name()` call whose name is an
operation of an AWS SDK crate the binary depends on (the operations are read from the SDK crates
in cargo's registry, at the versions Cargo.lock pins)."""

import os
import pathlib
import re

import pytest

from conftest import REPO
from terraform_module import as_list, module_locals

# SDK crate -> IAM service prefix.
SERVICES = {
    "aws-sdk-cloudwatch": "cloudwatch",
    "aws-sdk-sns": "sns",
    "aws-sdk-eventbridge": "events",
    "aws-sdk-cloudwatchlogs": "logs",
}

# What the Lambda's role grants for the platform rather than for the code's calls. The code calls
# the two logs actions too (job records, the findings cursor): the role grants them on the job log
# group in statements of their own, and these keep the function's own log group.
PLATFORM = {
    "logs:CreateLogStream": "the runtime writes the function's logs",
    "logs:PutLogEvents": "the runtime writes the function's logs",
    "xray:PutTraceSegments": "active tracing",
    "xray:PutTelemetryRecords": "active tracing",
    "sqs:SendMessage": "Lambda sends failed events to the dead-letter queue with the function's role",
    "kms:GenerateDataKey": "publishing to the encrypted topic and queue",
    "kms:Decrypt": "publishing to the encrypted topic and queue",
}


def locked_versions() -> dict:
    """crate -> version from Cargo.lock."""
    text = (REPO / "Cargo.lock").read_text()
    out = {}
    for m in re.finditer(r'\[\[package\]\]\nname = "([^"]+)"\nversion = "([^"]+)"', text):
        out[m.group(1)] = m.group(2)
    return out


def operations() -> dict:
    """snake_case operation -> set of IAM actions it may be, over the SDK crates we use."""
    cargo_home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    versions = locked_versions()
    ops = {}
    for crate, prefix in SERVICES.items():
        if crate not in versions:
            # Not a dependency (yet): nothing can call it. Only an absent crate is skipped; one
            # in Cargo.lock but not in the registry still fails below.
            continue
        version = versions[crate]
        dirs = list((cargo_home / "registry" / "src").glob(f"*/{crate}-{version}/src/operation"))
        assert dirs, f"{crate} {version} is not in cargo's registry: run cargo build first"
        for op in dirs[0].iterdir():
            if op.is_dir():
                pascal = "".join(w.capitalize() for w in op.name.split("_"))
                ops.setdefault(op.name, set()).add(f"{prefix}:{pascal}")
    return ops


def code(crate_dir: str, skip: tuple = ()) -> str:
    """A crate's source (or a folder of it) without its unit tests (`#[cfg(test)]` to the end of
    each file), less the folders in `skip`."""
    text = ""
    root = REPO / crate_dir / "src" if (REPO / crate_dir / "src").is_dir() else REPO / crate_dir
    for f in sorted(root.rglob("*.rs")):
        if any(f.is_relative_to(REPO / d) for d in skip):
            continue
        body = f.read_text()
        text += body.split("#[cfg(test)]")[0]
    return text


def actions_called(crate_dirs: list[str], skip: tuple = ()) -> set:
    ops = operations()
    called = set()
    for d in crate_dirs:
        for name in re.findall(r"\.([a-z][a-z0-9_]*)\(\)", code(d, skip)):
            if name in ops:
                candidates = ops[name]
                assert len(candidates) == 1, f"{name} is an operation of several services: {candidates}"
                called |= candidates
    return called


def granted(statements) -> set:
    out = set()
    for s in statements:
        assert s["Effect"] in ("Allow", "Deny")
        if s["Effect"] == "Allow":
            out |= set(as_list(s["Action"]))
    return out


def test_the_lambda_role_grants_exactly_what_the_lambda_calls():
    called = actions_called(["lambda", "sink"])
    assert called >= {"cloudwatch:GetMetricData", "cloudwatch:PutMetricData", "sns:Publish", "events:PutEvents",
                      "logs:FilterLogEvents"}, called
    # The PCS statement joins the role where pcs_scaling_log_group is given.
    loc = module_locals()
    role = granted([*loc["lambda_role_statements"], loc["lambda_pcs_scaling_statement"]])
    missing = called - role
    assert not missing, f"the Lambda calls {sorted(missing)}, which its role does not grant"
    extra = role - called - set(PLATFORM)
    assert not extra, f"the Lambda's role grants {sorted(extra)}, which no code calls"


def test_the_instance_policy_grants_exactly_what_the_shipper_calls():
    # `report` runs on login nodes under the job report reader policy, not the instance's.
    called = actions_called(["shipper", "sink"], skip=("shipper/src/report",))
    assert called == {"cloudwatch:PutMetricData", "logs:CreateLogStream", "logs:PutLogEvents"}, called
    loc = module_locals()
    assert granted(loc["cluster_instance_policy"]["Statement"]) == called
    # The `otlp` destination is plain HTTP (no SDK call to find): CloudWatch's OTLP endpoint
    # authorizes cloudwatch:PutMetricData, which the statement otlp_metrics adds grants alone.
    assert granted([loc["otlp_metrics_statement"]]) == {"cloudwatch:PutMetricData"}
    # The node's price (job costs) is looked up by signed HTTPS requests too (no SDK call to
    # find): the query's Action and the JSON target name them in the code, and only they are
    # granted, by the statement job_cost_price_lookup adds.
    lookup = code("shipper/src/cost")
    named = {"ec2:DescribeSpotPriceHistory"} if '("Action", "DescribeSpotPriceHistory")' in lookup else set()
    if '"AWSPriceListService.GetProducts"' in lookup:
        named.add("pricing:GetProducts")
    assert granted([loc["price_lookup_statement"]]) == named == {"ec2:DescribeSpotPriceHistory", "pricing:GetProducts"}


def test_the_nodes_own_role_adds_only_what_the_pcs_agent_calls():
    """The nodes' role (terraform/nodes.tf, for AWS PCS) has the instance policy attached for
    the shipper; its own policy is PCS's registration of the node, which the PCS agent calls,
    not slurm-cw-shipper."""
    called = actions_called(["shipper", "sink"], skip=("shipper/src/report",))
    own = granted(module_locals()["node_pcs_policy"]["Statement"])
    assert own == {"pcs:RegisterComputeNodeGroupInstance"}
    assert not own & called


def test_the_job_report_reader_grants_exactly_what_report_calls():
    """`slurm-cw-shipper report` (shipper/src/report) runs under it: it may only read job records."""
    called = actions_called(["shipper/src/report"])
    assert called == {"logs:FilterLogEvents"}, called
    assert granted(module_locals()["job_report_reader_policy"]["Statement"]) == called


@pytest.mark.parametrize("snippet,expected", [
    ("client.put_metric_alarm()\n.alarm_name(x)", {"cloudwatch:PutMetricAlarm"}),
    ("sns.publish().topic_arn(t)", {"sns:Publish"}),
    ("logs.filter_log_events()\n.log_group_name(g)", {"logs:FilterLogEvents"}),
    ("x.len() + y.clone()", set()),
])
def test_the_scanner_finds_sdk_calls(snippet, expected, tmp_path, monkeypatch):
    if any(a.startswith("logs:") for a in expected) and "aws-sdk-cloudwatchlogs" not in locked_versions():
        pytest.skip("aws-sdk-cloudwatchlogs is not in Cargo.lock")
    ops = operations()
    found = set()
    for name in re.findall(r"\.([a-z][a-z0-9_]*)\(\)", snippet):
        found |= ops.get(name, set())
    assert found == expected
