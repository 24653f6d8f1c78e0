"""Static checks of the terraform/ module: HCL parses, inputs and outputs are documented, the
IAM policies say exactly what they should, checkov finds nothing, and (where a terraform binary
and the AWS provider are installed locally) `terraform validate` and the module's mocked
`terraform test` pass."""

import copy
import functools
import json
import os
import pathlib
import re
import shutil
import subprocess
import zipfile

import hcl2
import pytest
from hcl2.utils import SerializationOptions

from conftest import REPO, TERRAFORM, find_tool

TF_FILES = sorted(p for p in TERRAFORM.rglob("*.tf") if ".terraform" not in p.parts)
MODULE_FILES = sorted(TERRAFORM.glob("*.tf"))

# The checks skipped in the .tf files (each with its reason next to the resource). A new skip
# must be added here on purpose.
ALLOWED_SKIPS = {
    "CKV_AWS_117",  # Lambda outside a VPC: it calls only public AWS APIs
    "CKV_AWS_272",  # Lambda code signing: the package is built by the deployer, pinned by hash
    "CKV_AWS_338",  # log retention under a year: a variable, default 30 days
}

REQUIRED_OUTPUTS = {
    "cluster_instance_policy_arn", "sns_topic_arn", "lambda_function_name", "dashboard_name",
    "job_log_group_name", "job_report_reader_policy_arn", "alarm_prefix",
}

# The retention values CloudWatch Logs accepts.
RETENTIONS = [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653]


@functools.cache
def _parse(path: pathlib.Path) -> dict:
    opts = SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)
    with path.open() as f:
        return hcl2.load(f, serialization_options=opts)


def parse(path: pathlib.Path) -> dict:
    """The file as python-hcl2 reads it: string literals unquoted, expressions as "${...}"."""
    return copy.deepcopy(_parse(path))


def blocks(kind: str, files=MODULE_FILES) -> dict:
    """name -> body of every `kind` block (variable, output) in the module."""
    out = {}
    for f in files:
        for entry in parse(f).get(kind, []):
            for name, body in entry.items():
                assert name not in out, f"{kind} {name} is declared twice"
                out[name] = body
    return out


def resources() -> dict:
    """(type, name) -> body of every resource in the module."""
    out = {}
    for f in MODULE_FILES:
        for entry in parse(f).get("resource", []):
            for rtype, named in entry.items():
                for name, body in named.items():
                    out[(rtype, name)] = body
    return out


def module_locals() -> dict:
    out = {}
    for f in MODULE_FILES:
        for entry in parse(f).get("locals", []):
            for k, v in entry.items():
                assert k not in out, f"local {k} is declared twice"
                out[k] = v
    return out


def one(x):
    """A block's body: python-hcl2 gives nested blocks as lists."""
    if isinstance(x, list):
        assert len(x) == 1, x
        return x[0]
    return x


def as_list(x):
    return x if isinstance(x, list) else [x]


# --- parsing ---------------------------------------------------------------------------------


def test_tf_files_found():
    assert TERRAFORM / "versions.tf" in TF_FILES
    assert TERRAFORM / "examples" / "basic" / "main.tf" in TF_FILES


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_tf_file_parses(path):
    try:
        _parse.__wrapped__(path)
    except Exception as e:  # python-hcl2 raises lark's exceptions
        pytest.fail(f"{path.relative_to(REPO)}: HCL parse error: {e}")


def test_versions():
    """The module and its example admit hashicorp/aws 5.x and 6.x."""
    for path in (TERRAFORM / "versions.tf", TERRAFORM / "examples" / "basic" / "main.tf"):
        tf = one(parse(path)["terraform"])
        assert tf["required_version"] == ">= 1.5"
        aws = one(tf["required_providers"])["aws"]
        assert aws == {"source": "hashicorp/aws", "version": ">= 5.0, < 7.0"}, path


# Attributes that hashicorp/aws 6.x deprecates or removes, or that 5.x lacks, as the module
# would reference them. Without a 6.x provider here (nothing is downloaded) this is the check that
# the module keeps to what both majors accept; test_terraform_validate_and_mocked_tests validates
# against the 5.x schema where that provider is installed.
NOT_IN_BOTH_MAJORS = {
    r"data\.aws_region\.[a-z_]+\.name\b": "deprecated in 6.x: use .id (the region's name in 5.x and 6.x)",
    r"data\.aws_region\.[a-z_]+\.region\b": "only in 6.x: use .id",
    r"\bis_enabled\s*=": "aws_cloudwatch_event_rule.is_enabled: deprecated, use state",
    r"\binline_policy\b": "aws_iam_role.inline_policy: deprecated, use aws_iam_role_policy",
    r"\bmanaged_policy_arns\b": "aws_iam_role.managed_policy_arns: deprecated, use attachments",
}


@pytest.mark.parametrize("path", TF_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_nothing_deprecated_in_provider_5_or_6(path):
    text = "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith("#"))
    for pattern, why in NOT_IN_BOTH_MAJORS.items():
        m = re.search(pattern, text)
        assert not m, f"{path.relative_to(REPO)}: {m.group(0)!r}: {why}"


# --- inputs and outputs ----------------------------------------------------------------------


def test_every_variable_has_description_and_type():
    for files in (MODULE_FILES, [TERRAFORM / "examples" / "basic" / "main.tf"]):
        for name, body in blocks("variable", files).items():
            assert str(body.get("description", "")).strip(), f"variable {name} has no description"
            assert "type" in body, f"variable {name} has no type"


def test_variable_defaults():
    v = blocks("variable")
    assert v["lambda_memory_size"]["default"] == 256
    assert v["lambda_timeout"]["default"] == 60
    assert v["log_retention_days"]["default"] == 30
    assert v["schedule_expression"]["default"] == "rate(1 minute)"
    assert v["event_bus_name"]["default"] == "default"
    assert v["namespace"]["default"] is None  # the cluster's own: local.namespace
    assert v["alarm_rules"]["default"] is None
    assert v["lambda_reserved_concurrency"]["default"] is None
    assert v["job_log_retention_days"]["default"] == 30
    assert v["create_instance_profile"]["default"] is False  # no node role unless asked, as before
    assert v["instance_profile_path"]["default"] == "/" and v["instance_role_policy_arns"]["default"] == []
    assert v["otlp_metrics"]["default"] is False and v["otlp_metrics"]["type"] == "bool"
    assert "default" not in v["cluster_name"] and "default" not in v["lambda_zip_path"]
    thresholds = v["thresholds"]["type"]
    for key, default in {
        "idle_gpu_percent": 5,
        "idle_gpu_minutes": 30,
        "low_cpu_efficiency_percent": 20,
        "low_cpu_minutes": 60,
        "memory_over_requested_percent": 25,
        "backlog_change_nodes": 1,
    }.items():
        assert re.search(rf"\b{key}\s*=\s*optional\(number,\s*{default}\)", thresholds), f"thresholds.{key} must default to {default}"


def test_required_outputs_exist_and_are_described():
    outputs = blocks("output")
    missing = REQUIRED_OUTPUTS - outputs.keys()
    assert not missing, f"missing outputs: {sorted(missing)}"
    for name, body in outputs.items():
        assert str(body.get("description", "")).strip(), f"output {name} has no description"
    assert outputs["cluster_instance_policy_arn"]["value"] == "${aws_iam_policy.cluster_instance.arn}"


# --- IAM ---------------------------------------------------------------------------------------


def test_instance_policy_allows_metrics_in_the_namespace_and_the_job_streams_only():
    policy = module_locals()["cluster_instance_policy"]
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert list(statements) == ["ShipSlurmMetrics", "WriteJobRecords", "NotTheLambdaCursor"]
    metrics = statements["ShipSlurmMetrics"]
    assert metrics["Effect"] == "Allow"
    assert as_list(metrics["Action"]) == ["cloudwatch:PutMetricData"]
    assert metrics["Resource"] == "*"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "${local.namespace}"}}
    records = statements["WriteJobRecords"]
    assert records["Effect"] == "Allow"
    assert sorted(as_list(records["Action"])) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    # Streams of the job group only: both actions are authorized on the stream.
    assert records["Resource"] == "${aws_cloudwatch_log_group.jobs.arn}:log-stream:*"
    deny = statements["NotTheLambdaCursor"]
    assert deny["Effect"] == "Deny" and sorted(as_list(deny["Action"])) == sorted(as_list(records["Action"]))
    # Every cursor stream of the Lambda ("_lambda", "_lambda-pcs-scaling"): all start so.
    assert deny["Resource"] == "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}*"
    loc = module_locals()
    assert loc["lambda_scaling_cursor_stream"].startswith(loc["lambda_cursor_stream"])
    for s in statements.values():
        assert "NotAction" not in s and "NotResource" not in s
        assert "Condition" not in s or s is metrics
    res = resources()
    # These statements always, and the OTLP one after them with otlp_metrics: one policy, so
    # ParallelCluster and the nodes' role need nothing more for OTLP.
    assert re.fullmatch(
        r"\$\{jsonencode\(\{\s*Version\s*=\s*local\.cluster_instance_policy\.Version,?\s*"
        r"Statement\s*=\s*concat\(local\.cluster_instance_policy\.Statement,\s*"
        r"var\.otlp_metrics\s*\?\s*\[local\.otlp_metrics_statement\]\s*:\s*\[\]\),?\s*\}\)\}",
        res[("aws_iam_policy", "cluster_instance")]["policy"],
    ), res[("aws_iam_policy", "cluster_instance")]["policy"]
    # The module's IAM managed policies: the instances' and the job report readers'.
    assert sorted(k for k in res if k[0] == "aws_iam_policy") == [
        ("aws_iam_policy", "cluster_instance"), ("aws_iam_policy", "job_report_reader"),
    ]


def test_the_otlp_statement_allows_put_metric_data_only_without_a_namespace_key():
    """otlp_metrics adds one statement: PutMetricData (what CloudWatch's OTLP endpoint
    authorizes) where the request carries no cloudwatch:namespace key, as OTLP has none."""
    s = module_locals()["otlp_metrics_statement"]
    assert (s["Sid"], s["Effect"], as_list(s["Action"]), s["Resource"]) == (
        "ShipOtlpMetrics", "Allow", ["cloudwatch:PutMetricData"], "*",
    )
    assert s["Condition"] == {"Null": {"cloudwatch:namespace": "true"}}
    assert "NotAction" not in s and "NotResource" not in s
    v = blocks("variable")["otlp_metrics"]
    assert "OTLP" in v["description"] and "403" in v["description"]
    # The description of the policy never follows otlp_metrics: a new description replaces the
    # policy, which fails while ParallelCluster's roles have it attached.
    assert "otlp" not in resources()[("aws_iam_policy", "cluster_instance")]["description"].lower()


def test_job_report_reader_policy_reads_the_job_log_group_only_and_never_from_an_instance():
    allow, deny = module_locals()["job_report_reader_policy"]["Statement"]
    group = ["${aws_cloudwatch_log_group.jobs.arn}", "${aws_cloudwatch_log_group.jobs.arn}:*"]
    assert allow["Effect"] == "Allow"
    assert as_list(allow["Action"]) == ["logs:FilterLogEvents"]
    # FilterLogEvents is authorized on the group, which IAM matches as "<group ARN>:log-stream:".
    assert allow["Resource"] == group
    # Every user of an instance can use its role's credentials, which carry ec2:SourceInstanceARN:
    # the records of all users are for a person's own (administrator) credentials only.
    assert deny["Effect"] == "Deny"
    assert as_list(deny["Action"]) == ["logs:FilterLogEvents"] and deny["Resource"] == group
    assert deny["Condition"] == {"Null": {"ec2:SourceInstanceARN": "false"}}
    policy = resources()[("aws_iam_policy", "job_report_reader")]
    assert policy["policy"] == "${jsonencode(local.job_report_reader_policy)}"
    assert policy["path"] == "${var.iam_path}"
    assert blocks("output")["job_report_reader_policy_arn"]["value"] == "${aws_iam_policy.job_report_reader.arn}"


def test_job_log_group():
    loc = module_locals()
    assert loc["job_log_group"] == "/slurm-cw/${var.cluster_name}/jobs"
    assert loc["lambda_cursor_stream"] == "_lambda"
    group = resources()[("aws_cloudwatch_log_group", "jobs")]
    assert group["name"] == "${local.job_log_group}"
    assert group["retention_in_days"] == "${var.job_log_retention_days}"
    # Encrypted like the Lambda's group, with the module's key (test_kms_key_policy: the key
    # lets CloudWatch Logs use it for this group).
    assert group["kms_key_id"] == "${aws_kms_key.this.arn}"
    assert blocks("output")["job_log_group_name"]["value"] == "${aws_cloudwatch_log_group.jobs.name}"


def test_lambda_role_statements():
    statements = {s["Sid"]: s for s in module_locals()["lambda_role_statements"]}
    actions = {sid: sorted(as_list(s["Action"])) for sid, s in statements.items()}
    assert actions == {
        "ReadMetrics": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"],
        "WriteDerivedMetrics": ["cloudwatch:PutMetricData"],
        "ManageClusterAlarms": ["cloudwatch:DeleteAlarms", "cloudwatch:DescribeAlarms", "cloudwatch:PutMetricAlarm"],
        "PublishNotices": ["sns:Publish"],
        "UseTheTopicKey": ["kms:Decrypt", "kms:GenerateDataKey"],
        "SendEvents": ["events:PutEvents"],
        "DeadLetterQueue": ["sqs:SendMessage"],
        "ReadJobFindings": ["logs:FilterLogEvents"],
        "KeepCursors": ["logs:CreateLogStream", "logs:GetLogEvents", "logs:PutLogEvents"],
        "WriteOwnLogs": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Tracing": ["xray:PutTelemetryRecords", "xray:PutTraceSegments"],
    }
    for s in statements.values():
        assert s["Effect"] == "Allow"
        assert not any("*" in a for a in as_list(s["Action"])), s
    resources_ = {sid: s["Resource"] for sid, s in statements.items()}
    # "*" only where the action has no resource-level permissions.
    assert {sid for sid, r in resources_.items() if r == "*"} == {"ReadMetrics", "WriteDerivedMetrics", "Tracing"}
    assert statements["WriteDerivedMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "${local.namespace}"}}
    assert resources_["ManageClusterAlarms"] == "${local.alarm_arn_prefix}*"
    assert resources_["PublishNotices"] == "${aws_sns_topic.alarms.arn}"
    assert resources_["UseTheTopicKey"] == "${aws_kms_key.this.arn}"
    assert resources_["SendEvents"] == "${local.event_bus_arn}"
    assert resources_["ReadJobFindings"] == ["${aws_cloudwatch_log_group.jobs.arn}", "${aws_cloudwatch_log_group.jobs.arn}:*"]
    # The cursors' two streams alone: not the nodes' streams.
    assert resources_["KeepCursors"] == [
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_scaling_cursor_stream}",
    ]
    assert resources_["WriteOwnLogs"] == "${aws_cloudwatch_log_group.lambda.arn}:*"

    loc = module_locals()
    assert loc["alarm_prefix"] == "slurm-cw-${var.cluster_name}/"
    assert loc["alarm_arn_prefix"] == (
        "arn:${local.partition}:cloudwatch:${local.region}:${local.account_id}:alarm:${local.alarm_prefix}"
    )
    assert loc["event_bus_arn"].endswith(":event-bus/${var.event_bus_name}")
    policy = resources()[("aws_iam_role_policy", "lambda")]["policy"]
    assert re.search(
        r"Statement\s*=\s*concat\(local\.lambda_role_statements,\s*var\.pcs_scaling_log_group\s*==\s*null\s*\?\s*\[\]\s*:\s*\[local\.lambda_pcs_scaling_statement\]\)",
        policy,
    ), policy


def test_the_lambda_reads_the_pcs_scaling_group_alone_and_only_where_given():
    loc = module_locals()
    s = loc["lambda_pcs_scaling_statement"]
    assert (s["Sid"], s["Effect"], as_list(s["Action"])) == ("ReadPcsScalingLogs", "Allow", ["logs:FilterLogEvents"])
    # FilterLogEvents is authorized on the group: its ARN, and "<ARN>:*" as for the job group.
    assert s["Resource"] == ["${local.pcs_scaling_log_group_arn}", "${local.pcs_scaling_log_group_arn}:*"]
    arn = loc["pcs_scaling_log_group_arn"]
    assert arn.startswith("${var.pcs_scaling_log_group == null ? \"\" : ")
    assert "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:${var.pcs_scaling_log_group}" in arn
    v = blocks("variable")
    assert v["pcs_scaling_log_group"]["default"] is None and v["pcs_jobcomp_log_group"]["default"] is None


def cluster_name_regex() -> str:
    (validation,) = blocks("variable")["cluster_name"]["validation"]
    m = re.fullmatch(r'\$\{can\(regex\("(.+)", var\.cluster_name\)\)\}', validation["condition"])
    assert m, validation["condition"]
    return m.group(1).replace("\\\\", "\\")  # HCL's "\\" is one backslash


@pytest.mark.parametrize("name,ok", [
    ("hpc", True), ("hpc-prod", True), ("a_b-1", True), ("c" * 40, True),
    ("hpc/prod", False), ("/hpc", False), ("hpc/", False), ("has space", False), ("-hpc", False), ("c" * 41, False),
])
def test_cluster_name_validation(name, ok):
    """'/' ends the alarm prefix: a cluster name must never hold one."""
    assert bool(re.fullmatch(cluster_name_regex(), name)) == ok, name


def iam_glob(pattern: str, value: str) -> bool:
    """IAM's Resource matching: '*' any run of characters, '?' one, case-sensitive."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.S) is not None


def alarm_resource(cluster: str) -> str:
    """The ManageClusterAlarms resource for a cluster, rendered from the module's locals."""
    loc = module_locals()
    values = {"var.cluster_name": cluster, "local.partition": "aws", "local.region": "us-east-1",
              "local.account_id": "123456789012"}
    values["local.alarm_prefix"] = re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], loc["alarm_prefix"])
    statement = next(s for s in loc["lambda_role_statements"] if s["Sid"] == "ManageClusterAlarms")
    text = statement["Resource"].replace("${local.alarm_arn_prefix}", loc["alarm_arn_prefix"])
    return re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], text)


def test_alarm_resources_of_two_clusters_do_not_overlap():
    """Cluster hpc's Lambda role may not touch cluster hpc-prod's alarms, nor the reverse (with
    the old prefix "slurm-cw-<cluster>-", hpc's pattern covered hpc-prod's alarms)."""
    pairs = [("hpc", "hpc-prod"), ("hpc", "hpc_"), ("a", "a-b"), ("hpc", "HPC")]
    arn = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:"
    for a, b in pairs:
        pa, pb = alarm_resource(a), alarm_resource(b)
        assert pa == f"{arn}slurm-cw-{a}/*"
        for own, other, pattern in ((a, b, pa), (b, a, pb)):
            assert iam_glob(pattern, f"{arn}slurm-cw-{own}/NodesDown")
            for rule in ("NodesDown", "x/y", ""):
                assert not iam_glob(pattern, f"{arn}slurm-cw-{other}/{rule}"), (pattern, other, rule)
        # Nor the module's own alarm.
        assert not iam_glob(pa, f"{arn}SlurmCW-{a}-lambda-failing")


# --- One namespace per cluster -----------------------------------------------------------------
# IAM confines cloudwatch:PutMetricData by namespace (cloudwatch:namespace), never by a
# dimension: with one namespace shared by clusters, root on a node of one could write another's
# figures, fire its alarms and send its autoscaling events.


def cluster_namespace(cluster: str, namespace: str | None = None) -> str:
    """local.namespace for these inputs, evaluated from its expression (a conditional on
    var.namespace being null, else a template of var.cluster_name)."""
    expr = module_locals()["namespace"]
    m = re.fullmatch(r'\$\{var\.namespace != null \? var\.namespace : "(.+)"\}', expr)
    assert m, f"local.namespace is no longer `var.namespace != null ? var.namespace : \"...\"`: {expr}"
    if namespace is not None:
        return namespace
    return m.group(1).replace("${var.cluster_name}", cluster)


def with_namespace(statements: list, namespace: str) -> list:
    """The statements as IAM gets them once local.namespace is rendered."""
    return json.loads(json.dumps(statements).replace("${local.namespace}", namespace))


def instance_statements(otlp_metrics: bool) -> list:
    """The instance policy's statements as aws_iam_policy.cluster_instance joins them (its
    expression is checked in test_instance_policy_allows_metrics_in_the_namespace_and_the_job_streams_only)."""
    loc = module_locals()
    return [*loc["cluster_instance_policy"]["Statement"], *([loc["otlp_metrics_statement"]] if otlp_metrics else [])]


def put_metric_data_allowed(statements: list, namespace: str | None) -> bool:
    """IAM's decision on cloudwatch:PutMetricData (Resource "*") into `namespace`, or, with
    None, a request without the cloudwatch:namespace key (an OTLP request): an explicit Deny
    wins, else an Allow whose conditions all hold, else the implicit deny. Only the operators
    the module uses are understood; another fails the test rather than guess."""

    def holds(op: str, key: str, wanted) -> bool:
        assert key == "cloudwatch:namespace", f"unexpected condition key {key}"
        if op == "StringEquals":  # exact, case-sensitive; an absent key matches nothing
            return namespace is not None and namespace in as_list(wanted)
        if op == "Null":  # "true": the key is absent; "false": it is present
            assert wanted in ("true", "false"), wanted
            return (namespace is None) == (wanted == "true")
        raise AssertionError(f"unexpected condition operator {op}")

    def applies(s: dict) -> bool:
        actions = as_list(s.get("Action", []))
        if not any(iam_glob(a, "cloudwatch:PutMetricData") for a in actions):
            return False
        assert "NotAction" not in s and "NotResource" not in s, s
        if not any(iam_glob(r, "*") for r in as_list(s["Resource"])):
            return False
        return all(holds(op, key, wanted) for op, keys in s.get("Condition", {}).items() for key, wanted in keys.items())

    matching = [s for s in statements if applies(s)]
    if any(s["Effect"] == "Deny" for s in matching):
        return False
    return any(s["Effect"] == "Allow" for s in matching)


@pytest.mark.parametrize("statement,namespace,allowed", [
    ({"Condition": {"StringEquals": {"cloudwatch:namespace": "A"}}}, "A", True),
    ({"Condition": {"StringEquals": {"cloudwatch:namespace": "A"}}}, "a", False),
    ({"Condition": {"StringEquals": {"cloudwatch:namespace": "A"}}}, None, False),
    ({"Condition": {"Null": {"cloudwatch:namespace": "true"}}}, None, True),
    ({"Condition": {"Null": {"cloudwatch:namespace": "true"}}}, "A", False),
    ({"Condition": {"Null": {"cloudwatch:namespace": "false"}}}, "A", True),
    ({"Condition": {"Null": {"cloudwatch:namespace": "false"}}}, None, False),
    ({}, None, True),
    ({}, "B", True),
])
def test_the_policy_evaluator(statement, namespace, allowed):
    """The evaluator the namespace tests rely on, on IAM's documented semantics."""
    s = {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*", **statement}
    assert put_metric_data_allowed([s], namespace) is allowed
    assert not put_metric_data_allowed([s, {**s, "Effect": "Deny"}], namespace)


def test_the_namespace_is_the_clusters_own_unless_set():
    assert blocks("variable")["namespace"]["default"] is None
    assert cluster_namespace("hpc-a") == "Slurm/hpc-a"
    assert cluster_namespace("hpc-a", "Slurm") == "Slurm", "an explicit namespace wins"
    # Everything that names the namespace takes the local, never the variable itself.
    for path in MODULE_FILES:
        if path.name != "variables.tf":
            text = path.read_text()
            assert "var.namespace" not in text or path.name == "main.tf", f"{path.name} uses var.namespace"
    assert blocks("output")["namespace"]["value"] == "${local.namespace}"


def test_every_cluster_name_makes_a_valid_namespace():
    (validation,) = blocks("variable")["namespace"]["validation"]
    m = re.search(r'regex\("([^"]+)", var\.namespace\)', validation["condition"])
    assert m, validation["condition"]
    namespace_regex = m.group(1).replace("\\\\", "\\")
    # The longest and every character the cluster_name validation allows.
    for name in ("c" * 40, "A-Z_a-z-0-9", "0"):
        assert re.fullmatch(cluster_name_regex(), name), name
        ns = cluster_namespace(name)
        assert re.fullmatch(namespace_regex, ns) and not ns.startswith(("AWS/", ":")), ns


@pytest.mark.parametrize("otlp_metrics", [False, True], ids=["classic", "otlp_metrics"])
@pytest.mark.parametrize("a,b", [("hpc-a", "hpc-b"), ("hpc", "hpc-prod"), ("hpc", "HPC"), ("a", "a_b")])
def test_a_clusters_policies_cannot_put_into_another_clusters_namespace(a, b, otlp_metrics):
    """Cluster A's instance policy (and its Lambda's role) allow PutMetricData into A's
    namespace and no other: not B's, not the shared "Slurm", not one that merely starts with
    A's; with otlp_metrics too. A request without a namespace (OTLP) only with otlp_metrics, and
    never by the Lambda's role."""
    for name, statements, otlp in (("instance policy", instance_statements(otlp_metrics), otlp_metrics),
                                   ("Lambda role", module_locals()["lambda_role_statements"], False)):
        ns_a, ns_b = cluster_namespace(a), cluster_namespace(b)
        policy_a = with_namespace(statements, ns_a)
        assert put_metric_data_allowed(policy_a, ns_a), (name, ns_a)
        for other in (ns_b, "Slurm", f"{ns_a}/x", f"{ns_a} ", ns_a.lower() if ns_a != ns_a.lower() else ns_a.upper(),
                      "Slurm/*", f"{ns_a}*"):
            assert not put_metric_data_allowed(policy_a, other), (name, a, other)
        assert not put_metric_data_allowed(with_namespace(statements, ns_b), ns_a), (name, b, ns_a)
        assert put_metric_data_allowed(policy_a, None) is otlp, (name, "a request without cloudwatch:namespace")


@pytest.mark.parametrize("otlp_metrics", [False, True], ids=["classic", "otlp_metrics"])
def test_a_cluster_that_keeps_the_shared_namespace_gets_exactly_it(otlp_metrics):
    statements = with_namespace(instance_statements(otlp_metrics), cluster_namespace("hpc", "Slurm"))
    assert put_metric_data_allowed(statements, "Slurm")
    assert not put_metric_data_allowed(statements, "Slurm/hpc")


def test_kms_key_policy():
    res = resources()
    key = res[("aws_kms_key", "this")]
    assert key["enable_key_rotation"] is True
    statements = {s["Sid"]: s for s in module_locals()["kms_key_policy"]["Statement"]}
    assert statements["AccountAdministers"]["Principal"] == {
        "AWS": "arn:${local.partition}:iam::${local.account_id}:root"
    }
    assert statements["CloudWatchAlarmsPublishToTopic"]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert statements["LambdaRolePublishes"]["Principal"] == {"AWS": "${aws_iam_role.lambda.arn}"}
    logs = statements["CloudWatchLogsEncryptsTheLogGroups"]
    assert logs["Principal"] == {"Service": "logs.${local.region}.${data.aws_partition.current.dns_suffix}"}
    group_arn = "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:"
    assert logs["Condition"] == {"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": [
        group_arn + "${local.log_group}", group_arn + "${local.job_log_group}",
    ]}}
    for s in statements.values():
        assert s["Principal"] != "*" and s["Principal"] != {"AWS": "*"}
    assert res[("aws_sns_topic", "alarms")]["kms_master_key_id"] == "${aws_kms_key.this.arn}"


def test_the_nodes_role_and_profile_for_pcs():
    """Only with create_instance_profile; under instance_profile_path (PCS wants /aws-pcs/ or a
    name starting AWSPCS); the instance policy attached; PCS's registration and nothing else of
    its own."""
    res = resources()
    role, profile = res[("aws_iam_role", "node")], res[("aws_iam_instance_profile", "node")]
    for r in (role, profile):
        assert r["count"] == "${var.create_instance_profile ? 1 : 0}"
        assert r["path"] == "${var.instance_profile_path}"
        assert r["name"] == "${local.node_role_name}"
    assert module_locals()["node_role_name"] == "slurm-cw-${var.cluster_name}-node"
    assert profile["role"] == "${aws_iam_role.node[0].name}"
    assert role["permissions_boundary"] == "${var.role_permissions_boundary}"
    trust = re.sub(r"\s+", " ", role["assume_role_policy"])
    assert 'Principal = {Service = "ec2.amazonaws.com"}, Action = "sts:AssumeRole"' in trust, trust
    attach = res[("aws_iam_role_policy_attachment", "node_shipper")]
    assert attach["policy_arn"] == "${aws_iam_policy.cluster_instance.arn}"
    assert res[("aws_iam_role_policy", "node_pcs")]["policy"] == "${jsonencode(local.node_pcs_policy)}"
    (stmt,) = module_locals()["node_pcs_policy"]["Statement"]
    assert (stmt["Effect"], stmt["Action"], stmt["Resource"]) == ("Allow", "pcs:RegisterComputeNodeGroupInstance", "*")
    extra = res[("aws_iam_role_policy_attachment", "node_extra")]
    assert "var.instance_role_policy_arns" in extra["for_each"] and "var.create_instance_profile" in extra["for_each"]
    outputs = blocks("output")
    assert outputs["instance_profile_arn"]["value"] == "${one(aws_iam_instance_profile.node[*].arn)}"
    assert "/aws-pcs/" in blocks("variable")["instance_profile_path"]["description"]


# --- the Lambda and what is around it ---------------------------------------------------------


def test_lambda_function():
    res = resources()
    fn = res[("aws_lambda_function", "this")]
    assert fn["runtime"] == "provided.al2023"
    assert fn["handler"] == "bootstrap"
    assert fn["architectures"] == ["x86_64"]
    assert fn["filename"] == "${var.lambda_zip_path}"
    assert fn["source_code_hash"] == "${filebase64sha256(var.lambda_zip_path)}"
    assert fn["memory_size"] == "${var.lambda_memory_size}"
    assert fn["timeout"] == "${var.lambda_timeout}"
    # Unset unless asked for: any reservation fails on accounts with a concurrency quota of 10.
    assert fn["reserved_concurrent_executions"] == "${var.lambda_reserved_concurrency}"
    assert one(fn["tracing_config"])["mode"] == "Active"
    assert one(fn["dead_letter_config"])["target_arn"] == "${aws_sqs_queue.dlq.arn}"
    assert one(fn["environment"])["variables"] == {"SLURM_CW_LAMBDA_CONFIG": "${local.lambda_config}"}

    config = module_locals()["lambda_config"]
    for key, value in {
        "namespace": "local.namespace",
        "cluster_name": "var.cluster_name",
        "alarm_prefix": "local.alarm_prefix",
        "sns_topic_arn": "aws_sns_topic.alarms.arn",
        "event_bus": "var.event_bus_name",
        "rules": "local.alarm_rules",
        "thresholds": "var.thresholds",
        "job_log_group": "aws_cloudwatch_log_group.jobs.name",
        "pcs_scaling_log_group": "var.pcs_scaling_log_group",
    }.items():
        assert re.search(rf"\b{key}\s*=\s*{re.escape(value)}\b", config), f"lambda_config lacks {key} = {value}: {config}"
    rules = module_locals()["alarm_rules"]
    assert "var.alarm_rules" in rules and 'file("${path.module}/rules/default-rules.json")' in rules

    log_group = res[("aws_cloudwatch_log_group", "lambda")]
    assert log_group["name"] == "${local.log_group}"
    assert module_locals()["log_group"] == "/aws/lambda/${local.function_name}"
    assert log_group["retention_in_days"] == "${var.log_retention_days}"
    assert log_group["kms_key_id"] == "${aws_kms_key.this.arn}"


# Each input meant for the function, and where it must show: the function's own arguments, or
# its one environment variable (SLURM_CW_LAMBDA_CONFIG = local.lambda_config).
FUNCTION_INPUTS = {
    "cluster_name": "config",
    "namespace": "config",
    "event_bus_name": "config",
    "alarm_rules": "config",  # through local.alarm_rules
    "thresholds": "config",
    "function_name": "function",  # through local.function_name
    "lambda_zip_path": "function",
    "lambda_memory_size": "function",
    "lambda_timeout": "function",
    "lambda_reserved_concurrency": "function",
    "pcs_scaling_log_group": "config",
}
# Inputs that are not the function's settings.
OTHER_INPUTS = {
    "log_retention_days", "job_log_retention_days", "schedule_expression", "alarm_emails",
    "kms_key_deletion_window_in_days", "role_permissions_boundary", "iam_path", "tags",
    "pcs_jobcomp_log_group", "create_instance_profile", "instance_profile_path", "instance_role_policy_arns",
    "otlp_metrics",
}


def uses(text: str, name: str, loc: dict, seen=()) -> bool:
    """`text` refers to var.<name>, directly or through locals."""
    if re.search(rf"\bvar\.{name}\b", text):
        return True
    for local in set(re.findall(r"\blocal\.([a-z_0-9]+)", text)) - set(seen):
        if local in loc and uses(str(loc[local]), name, loc, (*seen, local)):
            return True
    return False


def test_every_function_setting_reaches_the_function():
    variables = set(blocks("variable"))
    assert variables == set(FUNCTION_INPUTS) | OTHER_INPUTS, (
        f"classify the new inputs in FUNCTION_INPUTS or OTHER_INPUTS: {sorted(variables ^ (set(FUNCTION_INPUTS) | OTHER_INPUTS))}"
    )
    # Any lambda_* input is the function's.
    assert {v for v in variables if v.startswith("lambda_")} <= set(FUNCTION_INPUTS)
    loc = module_locals()
    fn = dict(resources()[("aws_lambda_function", "this")])
    fn.pop("environment")
    for name, where in FUNCTION_INPUTS.items():
        if where == "config":
            assert uses(loc["lambda_config"], name, loc), f"var.{name} does not reach SLURM_CW_LAMBDA_CONFIG"
        else:
            assert uses(json.dumps(fn), name, loc), f"var.{name} does not reach aws_lambda_function.this"


def test_default_lambda_config_fits_the_environment():
    """Lambda allows 4 KB of environment variables; the module's precondition stops at 3800
    bytes of SLURM_CW_LAMBDA_CONFIG. Measured as terraform's jsonencode writes it (compact,
    with <, > and & escaped) with the default rules and a long topic ARN."""
    rules = json.loads((TERRAFORM / "rules" / "default-rules.json").read_text())
    config = {
        "namespace": "Slurm/" + "c" * 40,
        "cluster_name": "c" * 40,
        "alarm_prefix": "slurm-cw-" + "c" * 40 + "/",
        "sns_topic_arn": "arn:aws-us-gov:sns:us-gov-west-1:123456789012:slurm-cw-" + "c" * 40 + "-alarms",
        "event_bus": "default",
        "rules": rules,
        "job_log_group": "/slurm-cw/" + "c" * 40 + "/jobs",
        "pcs_scaling_log_group": "/aws/vendedlogs/pcs/cluster/PCS_SCALING_LOGS/pcs_abcdefghij",
        "thresholds": {"idle_gpu_percent": 5, "idle_gpu_minutes": 30, "low_cpu_efficiency_percent": 20,
                       "low_cpu_minutes": 60, "memory_over_requested_percent": 25, "backlog_change_nodes": 1},
    }
    text = json.dumps(config, separators=(",", ":"))
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(c, esc)
    print(f"SLURM_CW_LAMBDA_CONFIG with the default rules: {len(text)} of 3800 bytes")
    assert len(text) <= 3800, (
        f"the default rules make SLURM_CW_LAMBDA_CONFIG {len(text)} bytes: over the module's 3800-byte "
        "limit (Lambda allows 4 KB of environment); ship the rules in the package instead"
    )


def test_schedule_and_permission():
    res = resources()
    assert res[("aws_cloudwatch_event_rule", "schedule")]["schedule_expression"] == "${var.schedule_expression}"
    assert res[("aws_cloudwatch_event_target", "lambda")]["arn"] == "${aws_lambda_function.this.arn}"
    perm = res[("aws_lambda_permission", "schedule")]
    assert perm["principal"] == "events.amazonaws.com"
    assert perm["action"] == "lambda:InvokeFunction"
    assert perm["source_arn"] == "${aws_cloudwatch_event_rule.schedule.arn}"


def test_dashboard_uses_the_templates():
    dash = resources()[("aws_cloudwatch_dashboard", "cluster")]
    assert dash["dashboard_body"] == "${jsonencode(merge(local.dashboard, {widgets = local.dashboard_widgets}))}"
    loc = module_locals()
    body = re.sub(r"\s+", " ", loc["dashboard"])
    assert 'templatefile("${path.module}/dashboards/cluster.json.tftpl"' in body
    for var in ("cluster_name = var.cluster_name", "namespace = local.namespace", "region = local.region",
                "job_log_group = aws_cloudwatch_log_group.jobs.name"):
        assert var in body, body
    pcs = re.sub(r"\s+", " ", loc["pcs_widgets"])
    assert 'templatefile("${path.module}/dashboards/pcs.json.tftpl"' in pcs
    # Each PCS list only where its group is given.
    widgets = re.sub(r"\s+", " ", loc["dashboard_widgets"])
    assert "for w in local.pcs_widgets.scaling : w if var.pcs_scaling_log_group != null" in widgets
    assert "for w in local.pcs_widgets.jobcomp : w if var.pcs_jobcomp_log_group != null" in widgets


def test_generated_files_exist_and_are_json():
    rules = json.loads((TERRAFORM / "rules" / "default-rules.json").read_text())
    assert isinstance(rules, list)
    template = (TERRAFORM / "dashboards" / "cluster.json.tftpl").read_text()
    if "%{" not in template:  # plain interpolations only: render it here
        rendered = template
        for k, v in {"cluster_name": "c", "namespace": "Slurm/c", "region": "us-east-1", "job_log_group": "/slurm-cw/c/jobs"}.items():
            rendered = rendered.replace("${" + k + "}", v)
        assert "${" not in rendered.replace("$${", ""), "the dashboard template uses an unknown variable"
        assert "widgets" in json.loads(rendered.replace("$${", "${"))
    pcs = (TERRAFORM / "dashboards" / "pcs.json.tftpl").read_text()
    assert "%{" not in pcs
    for k, v in {"region": "us-east-1", "pcs_scaling_log_group": "/pcs/s", "pcs_jobcomp_log_group": "/pcs/j"}.items():
        pcs = pcs.replace("${" + k + "}", v)
    assert "${" not in pcs, "the PCS dashboard template uses an unknown variable"
    assert set(json.loads(pcs)) == {"scaling", "jobcomp"}


def test_everything_taggable_is_tagged():
    untaggable = {
        "aws_kms_alias", "aws_sns_topic_policy", "aws_sns_topic_subscription", "aws_iam_role_policy",
        "aws_lambda_permission", "aws_cloudwatch_event_target", "aws_cloudwatch_dashboard",
        "aws_lambda_function_event_invoke_config", "aws_iam_role_policy_attachment",
    }
    for (rtype, name), body in resources().items():
        if rtype not in untaggable:
            assert body.get("tags") == "${var.tags}", f"{rtype}.{name} is not tagged with var.tags"


def test_checkov_skips_have_reasons():
    pattern = re.compile(r"#\s*checkov:skip=(CKV2?_[A-Z0-9_]+)(?::(.*))?")
    found = {}
    for f in TF_FILES:
        for line in f.read_text().splitlines():
            m = pattern.search(line)
            if m:
                assert m.group(2) and len(m.group(2).strip()) >= 30, f"{f.name}: skip of {m.group(1)} needs a real reason"
                found[m.group(1)] = m.group(2)
    assert set(found) == ALLOWED_SKIPS


# --- checkov -----------------------------------------------------------------------------------


def checkov_bin() -> str:
    tool = find_tool("checkov", "CHECKOV", REPO / ".venv-infra-checkov" / "bin")
    if tool is None:
        pytest.fail("checkov not found: run tests/infra/run.sh (it installs it), or set CHECKOV")
    return tool


def test_checkov_finds_nothing(tmp_path):
    env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_NO_OUTPUT_COLOR="1")
    cmd = [
        checkov_bin(), "-d", str(TERRAFORM), "--framework", "terraform", "--compact",
        "--skip-download", "-o", "json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.stdout.strip(), f"checkov printed nothing (exit {proc.returncode}): {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    failed, skipped, passed, parse_errors = [], [], 0, 0
    for r in reports:
        summary = r["summary"]
        passed += summary["passed"]
        parse_errors += summary["parsing_errors"]
        results = r.get("results", {})
        failed += results.get("failed_checks", [])
        skipped += results.get("skipped_checks", [])
    detail = "\n".join(f"{c['check_id']} {c['resource']} ({c['file_path']}): {c['check_name']}" for c in failed)
    assert not failed, f"checkov failed checks:\n{detail}"
    assert parse_errors == 0, "checkov could not parse some files"
    assert passed >= 30, f"checkov passed only {passed} checks: did it see the module?"
    for c in skipped:
        assert c["check_id"] in ALLOWED_SKIPS, c["check_id"]
        assert len(c["check_result"].get("suppress_comment", "")) >= 30, c
    print(f"checkov: {passed} passed, 0 failed, {len(skipped)} skipped ({', '.join(sorted({c['check_id'] for c in skipped}))})")


# --- terraform itself, where it is installed ----------------------------------------------------

PLUGIN_DIR = pathlib.Path(os.environ.get("TF_PLUGIN_DIR", "/opt/tf-plugins"))


def terraform_bin() -> str:
    tool = shutil.which("terraform")
    if tool is None:
        pytest.skip("no terraform binary here: checked with python-hcl2 and checkov only")
    return tool


def run_tf(args, cwd, env, timeout=300):
    proc = subprocess.run([terraform_bin(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"terraform {' '.join(args)} in {cwd} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


@pytest.fixture
def tf_env(tmp_path):
    rc = tmp_path / "terraformrc"
    rc.write_text("")
    return dict(os.environ, TF_IN_AUTOMATION="1", CHECKPOINT_DISABLE="1", TF_CLI_CONFIG_FILE=str(rc), NO_COLOR="1")


def test_terraform_fmt(tf_env):
    run_tf(["fmt", "-check", "-recursive", "-diff", str(TERRAFORM)], cwd=REPO, env=tf_env)


def provider_dir(major: str) -> pathlib.Path | None:
    """The newest hashicorp/aws <major>.x in PLUGIN_DIR, as its <version>/<os_arch> directory."""
    found = [d.parent for d in PLUGIN_DIR.glob(f"registry.terraform.io/hashicorp/aws/{major}.*/*/terraform-provider-aws*")]
    key = lambda d: tuple(int(x) if x.isdigit() else 0 for x in d.parent.name.split("."))
    return max(found, key=key) if found else None


@pytest.mark.parametrize("major", ["5", "6"])
def test_terraform_validate_and_mocked_tests(tmp_path, tf_env, major):
    """For each major version of hashicorp/aws the module admits: `terraform init` from a local
    provider directory holding that version alone (nothing is downloaded), `validate` of the
    module and of the example with no warning (deprecations are warnings), and the module's own
    `terraform test` with a mocked AWS provider (terraform/tests/module.tftest.hcl)."""
    terraform_bin()
    source = provider_dir(major)
    if source is None:
        pytest.skip(f"no hashicorp/aws {major}.x provider in {PLUGIN_DIR} (set TF_PLUGIN_DIR): cannot init offline")
    plugins = tmp_path / "plugins" / source.relative_to(PLUGIN_DIR)
    plugins.parent.mkdir(parents=True)
    plugins.symlink_to(source, target_is_directory=True)
    module = tmp_path / "terraform"
    shutil.copytree(TERRAFORM, module, ignore=shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*"))
    init = ["init", "-backend=false", "-input=false", f"-plugin-dir={tmp_path / 'plugins'}"]
    example = module / "examples" / "basic"
    for root in (module, example):
        run_tf(init, cwd=root, env=tf_env)
        result = json.loads(run_tf(["validate", "-json"], cwd=root, env=tf_env))
        diagnostics = [f"{d['severity']}: {d['summary']}: {d.get('detail', '')}" for d in result["diagnostics"]]
        assert result["valid"] and not diagnostics, f"{root.relative_to(tmp_path)} with hashicorp/aws {source.parent.name}:\n" + "\n".join(diagnostics)
    print(f"terraform validate: module and example valid with hashicorp/aws {source.parent.name}, no warning")

    package = tmp_path / "bootstrap.zip"
    with zipfile.ZipFile(package, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n")
    out = run_tf(["test", "-no-color", f"-var=lambda_zip_path={package}"], cwd=module, env=tf_env, timeout=600)
    assert re.search(r"Success! \d+ passed, 0 failed", out), out
