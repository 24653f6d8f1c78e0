"""The IAM of the terraform/ module: what the instance policy, the job-report reader, the Lambda's
role, the KMS key and the PCS nodes' role allow and deny, evaluated statement by statement; one
namespace per cluster, so that no cluster's nodes can write another's figures."""

import json
import re

import pytest

from conftest import REPO
from terraform_module import MODULE_FILES, as_list, blocks, module_locals, resources


# --- IAM ---------------------------------------------------------------------------------------


def test_instance_policy_allows_metrics_in_the_namespace_and_the_job_streams_only():
    policy = module_locals()["cluster_instance_policy"]
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert list(statements) == ["ShipSlurmMetrics", "WriteJobRecords", "WriteMetricEvents", "NotTheLambdaCursor"]
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
    # The emf destination's events: streams of the metrics group only.
    events = statements["WriteMetricEvents"]
    assert events["Effect"] == "Allow"
    assert sorted(as_list(events["Action"])) == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert events["Resource"] == "${aws_cloudwatch_log_group.emf.arn}:log-stream:*"
    deny = statements["NotTheLambdaCursor"]
    assert deny["Effect"] == "Deny" and sorted(as_list(deny["Action"])) == sorted(as_list(records["Action"]))
    # Every cursor stream of the Lambda ("_lambda", "_lambda-pcs-scaling"): all start so.
    assert deny["Resource"] == "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}*"
    loc = module_locals()
    assert loc["lambda_scaling_cursor_stream"].startswith(loc["lambda_cursor_stream"])
    assert loc["lambda_budget_state_stream"].startswith(loc["lambda_cursor_stream"])
    assert loc["lambda_minutes_state_stream"].startswith(loc["lambda_cursor_stream"])
    for s in statements.values():
        assert "NotAction" not in s and "NotResource" not in s
        assert "Condition" not in s or s is metrics
    res = resources()
    # These statements always, the OTLP one with otlp_metrics and the price look-up's with
    # job_cost_price_lookup: one policy, so ParallelCluster and the nodes' role need nothing more.
    assert re.fullmatch(
        r"\$\{jsonencode\(\{\s*Version\s*=\s*local\.cluster_instance_policy\.Version,?\s*"
        r"Statement\s*=\s*concat\(\s*local\.cluster_instance_policy\.Statement,\s*"
        r"var\.otlp_metrics\s*\?\s*\[local\.otlp_metrics_statement\]\s*:\s*\[\],\s*"
        r"var\.job_cost_price_lookup\s*\?\s*\[local\.price_lookup_statement\]\s*:\s*\[\],?\s*\),?\s*\}\)\}",
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
    description = resources()[("aws_iam_policy", "cluster_instance")]["description"]
    assert "otlp" not in description.lower()
    # Nor the namespace or a log group: moving to Slurm/<cluster> (docs/deploying.md) must not
    # replace it. The cluster's name alone.
    assert set(re.findall(r"\$\{([^}]*)\}", description)) == {"var.cluster_name"}, description
    # And a description an earlier module wrote stays: IAM cannot change one, so any change of
    # the text would replace the policy on every existing deployment.
    text = (REPO / "terraform/cluster_policy.tf").read_text()
    block = text.split('resource "aws_iam_policy" "cluster_instance"', 1)[1].split("\n}\n", 1)[0]
    assert re.search(r"lifecycle\s*\{\s*ignore_changes\s*=\s*\[description\]\s*\}", block), block


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


def test_emf_log_group():
    """The emf destination's group: the shipper's default name, kept a day by default, encrypted
    with the module's key."""
    loc = module_locals()
    assert loc["emf_log_group"] == "/slurm-cw/${var.cluster_name}/metrics"
    group = resources()[("aws_cloudwatch_log_group", "emf")]
    assert group["name"] == "${local.emf_log_group}"
    assert group["retention_in_days"] == "${var.emf_log_retention_days}"
    assert group["kms_key_id"] == "${aws_kms_key.this.arn}"
    assert blocks("output")["emf_log_group_name"]["value"] == "${aws_cloudwatch_log_group.emf.name}"


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
    # The state's four streams alone: not the nodes' streams.
    assert resources_["KeepCursors"] == [
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_cursor_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_scaling_cursor_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_budget_state_stream}",
        "${aws_cloudwatch_log_group.jobs.arn}:log-stream:${local.lambda_minutes_state_stream}",
    ]
    # The Lambda's own names for them.
    budgets_rs = (REPO / "lambda/src/budgets/mod.rs").read_text()
    assert f'pub const STATE_STREAM: &str = "{module_locals()["lambda_budget_state_stream"]}";' in budgets_rs
    minutes_rs = (REPO / "lambda/src/minutes.rs").read_text()
    assert f'pub const STATE_STREAM: &str = "{module_locals()["lambda_minutes_state_stream"]}";' in minutes_rs
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
        group_arn + "${local.log_group}", group_arn + "${local.job_log_group}", group_arn + "${local.emf_log_group}",
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
